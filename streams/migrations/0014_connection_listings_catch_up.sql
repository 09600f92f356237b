-- A listing keeps its limit and subject filter in its row as well as in its NOTIFY, so that a
-- replica whose listening connection was lost, and with it the notifications sent meanwhile,
-- answers on reconnecting the listings still waiting for it: those asked within the last few
-- seconds that it has not answered.
--
-- A replica of the previous version inserts listings without them (the defaults: at most 1,000
-- connections, every subject) and does not catch up; its answers are unchanged.

ALTER TABLE connection_listings
    ADD COLUMN max_connections integer NOT NULL DEFAULT 1000,
    ADD COLUMN subject         text    NOT NULL DEFAULT '';
