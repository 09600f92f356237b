package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

const itemColumns = `i.id::text, i.project_key, i.number, i.key, i.title, i.description, i.state, i.version,
	i.created_at, i.updated_at,
	array(SELECT b.key FROM item_dependencies d JOIN items b ON b.id = d.blocker_id
		WHERE d.blocked_id = i.id ORDER BY b.number)`

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func scanItem(row pgx.CollectableRow) (tracker.Item, error) {
	var it tracker.Item
	err := row.Scan(&it.ID, &it.Project, &it.Number, &it.Key, &it.Title, &it.Description, &it.State,
		&it.Version, &it.CreatedAt, &it.UpdatedAt, &it.BlockedBy)
	it.CreatedAt, it.UpdatedAt = it.CreatedAt.UTC(), it.UpdatedAt.UTC()
	if it.BlockedBy == nil {
		it.BlockedBy = []string{}
	}
	return it, err
}

// getItem reads one item by key; forUpdate locks its row.
func getItem(ctx context.Context, q querier, key string, forUpdate bool) (*tracker.Item, error) {
	sql := "SELECT " + itemColumns + " FROM items i WHERE i.key = $1"
	if forUpdate {
		sql += " FOR UPDATE OF i"
	}
	rows, err := q.Query(ctx, sql, key)
	if err != nil {
		return nil, err
	}
	it, err := pgx.CollectExactlyOneRow(rows, scanItem)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fault.Errorf(tracker.ErrNotFound, "item %s not found", key)
	}
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// lockProject takes the project's counter row lock (creating the row for a project made
// elsewhere) and returns the last item number. ErrNotFound when the project does not exist.
func lockProject(ctx context.Context, tx pgx.Tx, project string) (int64, error) {
	var last int64
	err := tx.QueryRow(ctx, `INSERT INTO project_counters (project_key) VALUES ($1)
		ON CONFLICT (project_key) DO UPDATE SET last_number = project_counters.last_number
		RETURNING last_number`, project).Scan(&last)
	if pgCode(err) == "23503" {
		return 0, fault.Errorf(tracker.ErrNotFound, "project %s not found", project)
	}
	return last, err
}

func checkVersion(it *tracker.Item, ifVersion *int64) error {
	if ifVersion != nil && *ifVersion != it.Version {
		return fault.Errorf(tracker.ErrPrecondition, "item %s is at version %d, not %d", it.Key, it.Version, *ifVersion)
	}
	return nil
}

func (s *Store) Items(ctx context.Context, project string, filter tracker.ItemFilter, page tracker.ItemPage) (tracker.ItemList, error) {
	if err := page.Check(); err != nil {
		return tracker.ItemList{}, err
	}
	var list tracker.ItemList
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// One snapshot for the head and the items: seq is assigned in commit order, so the
		// events visible in it are exactly those of the changes visible in it.
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&list.Seq); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM projects WHERE key = $1)", project).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fault.Errorf(tracker.ErrNotFound, "project %s not found", project)
		}
		// Keyset paging on (project_key, number): one more row than the page says whether
		// another page follows. The rows are read one at a time, so that a page ends at its
		// byte budget without holding the rows past it.
		rows, err := tx.Query(ctx, "SELECT "+itemColumns+` FROM items i WHERE i.project_key = $1 AND i.number > $4
			AND ($2 = '' OR i.state = $2)
			AND ($3 = '' OR strpos(lower(i.title), lower($3)) > 0 OR strpos(lower(i.description), lower($3)) > 0)
			ORDER BY i.number LIMIT $5`, project, filter.State, filter.Query, page.After, page.Limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		bytes := 0
		for rows.Next() {
			it, err := scanItem(rows)
			if err != nil {
				return err
			}
			if !page.Take(len(list.Items), bytes, it.Size()) {
				list.Next = list.Items[len(list.Items)-1].Number
				break
			}
			list.Items = append(list.Items, it)
			bytes += it.Size()
		}
		return rows.Err()
	})
	if err != nil {
		var te *fault.Error
		if errors.As(err, &te) {
			return tracker.ItemList{}, err
		}
		return tracker.ItemList{}, wrap("items of "+project, err)
	}
	if list.Items == nil {
		list.Items = []tracker.Item{}
	}
	return list, nil
}

func wrap(op string, err error) error {
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

func (s *Store) Item(ctx context.Context, key string) (*tracker.Item, error) {
	it, err := getItem(ctx, s.pool, key, false)
	if err != nil {
		var te *fault.Error
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, wrap("item "+key, err)
	}
	return it, nil
}

func (s *Store) CreateItem(ctx context.Context, a tracker.Actor, project string, in tracker.ItemInput) (*tracker.Item, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	var it *tracker.Item
	err := s.tx(ctx, "create item in "+project, func(tx pgx.Tx) error {
		var n int64
		err := tx.QueryRow(ctx, `INSERT INTO project_counters (project_key, last_number) VALUES ($1, 1)
			ON CONFLICT (project_key) DO UPDATE SET last_number = project_counters.last_number + 1
			RETURNING last_number`, project).Scan(&n)
		if pgCode(err) == "23503" {
			return fault.Errorf(tracker.ErrNotFound, "project %s not found", project)
		}
		if err != nil {
			return err
		}
		v := tracker.Item{
			ID: tracker.NewID(time.Now()), Project: project, Number: n, Key: tracker.ItemKey(project, n), Title: in.Title,
			Description: in.Description, State: in.State, Version: 1, BlockedBy: []string{},
		}
		if err := tx.QueryRow(ctx, `INSERT INTO items (id, project_key, number, title, description, state, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at, updated_at`,
			v.ID, project, n, in.Title, in.Description, in.State, a.Subject).Scan(&v.CreatedAt, &v.UpdatedAt); err != nil {
			return err
		}
		v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
		it = &v
		return insertEvents(ctx, tx, []streams.NewEvent{tracker.ItemCreatedEvent(a, it)})
	})
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (s *Store) UpdateItem(ctx context.Context, a tracker.Actor, key string, patch tracker.ItemPatch, ifVersion *int64) (*tracker.Item, error) {
	if err := patch.Check(); err != nil {
		return nil, err
	}
	var out *tracker.Item
	err := s.tx(ctx, "update item "+key, func(tx pgx.Tx) error {
		before, err := getItem(ctx, tx, key, true)
		if err != nil {
			return err
		}
		if err := checkVersion(before, ifVersion); err != nil {
			return err
		}
		after, changed := tracker.ApplyPatch(before, patch)
		if !changed {
			out = before
			return nil
		}
		if err := tx.QueryRow(ctx, `UPDATE items SET title = $2, description = $3, state = $4,
			version = version + 1, updated_at = now() WHERE id = $1 RETURNING version, updated_at`,
			before.ID, after.Title, after.Description, after.State).Scan(&after.Version, &after.UpdatedAt); err != nil {
			return err
		}
		after.UpdatedAt = after.UpdatedAt.UTC()
		out = &after
		return insertEvents(ctx, tx, tracker.UpdateEvents(a, before, &after))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) DeleteItem(ctx context.Context, a tracker.Actor, key string, ifVersion *int64) error {
	project, _, ok := tracker.ParseItemKey(key)
	if !ok {
		return fault.Errorf(tracker.ErrNotFound, "item %s not found", key)
	}
	return s.tx(ctx, "delete item "+key, func(tx pgx.Tx) error {
		if _, err := lockProject(ctx, tx, project); err != nil {
			return err
		}
		self, err := getItem(ctx, tx, key, true)
		if err != nil {
			return err
		}
		if err := checkVersion(self, ifVersion); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT blocked_id FROM item_dependencies WHERE blocker_id = $1", self.ID)
		if err != nil {
			return err
		}
		blockedIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM items WHERE id = $1", self.ID); err != nil {
			return err
		}
		var evs []streams.NewEvent
		if len(blockedIDs) > 0 {
			// Items this one blocked lost a blocker: a change of theirs.
			if _, err := tx.Exec(ctx, `UPDATE items SET version = version + 1, updated_at = now()
				WHERE id = ANY($1::uuid[])`, blockedIDs); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "SELECT "+itemColumns+" FROM items i WHERE i.id = ANY($1::uuid[]) ORDER BY i.number", blockedIDs)
			if err != nil {
				return err
			}
			blocked, err := pgx.CollectRows(rows, scanItem)
			if err != nil {
				return err
			}
			for i := range blocked {
				evs = append(evs, tracker.DependencyEvent(a, "dependency.removed", &blocked[i], key))
			}
		}
		for _, b := range self.BlockedBy {
			evs = append(evs, tracker.DependencyEvent(a, "dependency.removed", self, b))
		}
		evs = append(evs, tracker.ItemDeletedEvent(a, self))
		return insertEvents(ctx, tx, evs)
	})
}

func (s *Store) AddDependency(ctx context.Context, a tracker.Actor, key, blocker string) (*tracker.Item, bool, error) {
	project, err := tracker.CheckDependency(key, blocker)
	if err != nil {
		return nil, false, err
	}
	var (
		out   *tracker.Item
		added bool
	)
	err = s.tx(ctx, "add dependency "+blocker+" of "+key, func(tx pgx.Tx) error {
		if _, err := lockProject(ctx, tx, project); err != nil {
			return err
		}
		it, err := getItem(ctx, tx, key, true)
		if err != nil {
			return err
		}
		var blockerID string
		err = tx.QueryRow(ctx, "SELECT id::text FROM items WHERE key = $1", blocker).Scan(&blockerID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.Errorf(tracker.ErrNotFound, "item %s not found", blocker)
		}
		if err != nil {
			return err
		}
		for _, b := range it.BlockedBy {
			if b == blocker {
				out = it
				return nil
			}
		}
		var cycle bool
		if err := tx.QueryRow(ctx, `WITH RECURSIVE reach(id) AS (
				SELECT blocked_id FROM item_dependencies WHERE blocker_id = $1
				UNION
				SELECT d.blocked_id FROM item_dependencies d JOIN reach r ON d.blocker_id = r.id
			) SELECT EXISTS (SELECT 1 FROM reach WHERE id = $2)`, it.ID, blockerID).Scan(&cycle); err != nil {
			return err
		}
		if cycle {
			return fault.Errorf(tracker.ErrConflict, "%s blocking %s would make a cycle", blocker, key)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO item_dependencies (project_key, blocker_id, blocked_id) VALUES ($1, $2, $3)`,
			project, blockerID, it.ID); err != nil {
			return err
		}
		if out, err = touch(ctx, tx, it); err != nil {
			return err
		}
		added = true
		return insertEvents(ctx, tx, []streams.NewEvent{tracker.DependencyEvent(a, "dependency.added", out, blocker)})
	})
	if err != nil {
		return nil, false, err
	}
	return out, added, nil
}

// touch advances the item's version and updated_at after a dependency change and returns it
// as it is now.
func touch(ctx context.Context, tx pgx.Tx, it *tracker.Item) (*tracker.Item, error) {
	if _, err := tx.Exec(ctx, "UPDATE items SET version = version + 1, updated_at = now() WHERE id = $1", it.ID); err != nil {
		return nil, err
	}
	return getItem(ctx, tx, it.Key, false)
}

func (s *Store) RemoveDependency(ctx context.Context, a tracker.Actor, key, blocker string) (*tracker.Item, error) {
	project, _, ok := tracker.ParseItemKey(key)
	if !ok {
		return nil, fault.Errorf(tracker.ErrNotFound, "item %s not found", key)
	}
	var out *tracker.Item
	err := s.tx(ctx, "remove dependency "+blocker+" of "+key, func(tx pgx.Tx) error {
		if _, err := lockProject(ctx, tx, project); err != nil {
			return err
		}
		it, err := getItem(ctx, tx, key, true)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM item_dependencies WHERE blocked_id = $1
			AND blocker_id = (SELECT id FROM items WHERE key = $2)`, it.ID, blocker)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fault.Errorf(tracker.ErrNotFound, "%s does not block %s", blocker, key)
		}
		if out, err = touch(ctx, tx, it); err != nil {
			return err
		}
		return insertEvents(ctx, tx, []streams.NewEvent{tracker.DependencyEvent(a, "dependency.removed", out, blocker)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
