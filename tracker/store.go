package tracker

import "context"

// Store keeps projects, members, items and dependencies, and appends every write's events to
// the event log in the same transaction (all or nothing). It does not check permissions:
// Service does. Errors are the package sentinels, wrapped.
type Store interface {
	// Role returns subject's role in project ("" if none) and whether the project exists.
	Role(ctx context.Context, project, subject string) (role string, projectExists bool, err error)
	// Projects lists the projects where subject has a role, or every project when all is
	// set, by key; Role is subject's role.
	Projects(ctx context.Context, subject string, all bool) ([]Project, error)
	// Project returns one project as subject sees it (ErrNotFound).
	Project(ctx context.Context, key, subject string) (*Project, error)
	// CreateProject creates the project with the actor's subject as its admin, appending
	// project.created and member.granted (ErrConflict if it exists).
	CreateProject(ctx context.Context, a Actor, key, name string) (*Project, error)
	// SetMember grants role (upsert), appending member.granted (ErrNotFound for the project).
	SetMember(ctx context.Context, a Actor, project, subject, role string) error
	// RemoveMember revokes subject's role, appending member.revoked (ErrNotFound).
	RemoveMember(ctx context.Context, a Actor, project, subject string) error

	// Items returns one page of the project's items that pass filter, by number, and the log
	// position they are consistent with: every event with a seq at or below it is reflected,
	// none above it is. The page's limit is set (ItemPage.Check).
	Items(ctx context.Context, project string, filter ItemFilter, page ItemPage) (ItemList, error)
	// Item returns one item (ErrNotFound).
	Item(ctx context.Context, key string) (*Item, error)
	// CreateItem numbers and stores a new item, appending item.created (ErrNotFound for the
	// project).
	CreateItem(ctx context.Context, a Actor, project string, in ItemInput) (*Item, error)
	// UpdateItem applies patch when ifVersion is nil or the current version (ErrPrecondition
	// otherwise). A patch that changes nothing returns the item as it is and appends nothing.
	UpdateItem(ctx context.Context, a Actor, key string, patch ItemPatch, ifVersion *int64) (*Item, error)
	// DeleteItem removes the item and its dependencies in both directions, appending
	// dependency.removed for each, then item.deleted.
	DeleteItem(ctx context.Context, a Actor, key string, ifVersion *int64) error
	// AddDependency records that blocker blocks key and returns key's item; added is false
	// (and nothing is appended) when it was already recorded. Self and cross-project
	// dependencies are ErrInvalid, a cycle ErrConflict.
	AddDependency(ctx context.Context, a Actor, key, blocker string) (it *Item, added bool, err error)
	// RemoveDependency removes "blocker blocks key" (ErrNotFound if not recorded) and returns
	// key's item.
	RemoveDependency(ctx context.Context, a Actor, key, blocker string) (*Item, error)
}
