-- The lengths of item titles and descriptions are the gateway's settings (BALLET_MAX_TITLE_CHARS,
-- BALLET_MAX_DESCRIPTION_BYTES, checked before a write). The table keeps the non-empty title and
-- the ceilings those settings may reach: 10,000 characters, 1 MiB of UTF-8.

ALTER TABLE items
    DROP CONSTRAINT items_title_check,
    DROP CONSTRAINT items_description_check,
    ADD CONSTRAINT items_title_check CHECK (title <> '' AND char_length(title) <= 10000),
    ADD CONSTRAINT items_description_check CHECK (octet_length(description) <= 1048576);
