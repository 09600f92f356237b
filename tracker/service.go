package tracker

import (
	"context"
	"fmt"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
)

// Options configure a Service. A nil *Options means defaults.
type Options struct {
	// AdminSubjects may create projects, see every project and manage every project's
	// members (BALLET_ADMIN_SUBJECTS). Default none.
	AdminSubjects []string
	// MaxTitleChars bounds item titles, in characters (BALLET_MAX_TITLE_CHARS), up to
	// CeilingTitleChars. Default DefaultMaxTitleChars.
	MaxTitleChars int
	// MaxDescriptionBytes bounds item descriptions, in bytes of UTF-8
	// (BALLET_MAX_DESCRIPTION_BYTES), up to CeilingDescriptionBytes. Default
	// DefaultMaxDescriptionBytes.
	MaxDescriptionBytes int
}

// Service is the tracker's API for REST and the planner's tools: it checks the actor's
// permissions, validates arguments and calls the Store.
type Service struct {
	store  Store
	admins map[string]bool
	limits Limits
}

// WithDefaults returns o with its zero item limits set to their defaults, and those above
// their ceilings lowered to them, as NewService applies them.
func (o Options) WithDefaults() Options {
	o.MaxTitleChars = limitOrDefault(o.MaxTitleChars, DefaultMaxTitleChars, CeilingTitleChars)
	o.MaxDescriptionBytes = limitOrDefault(o.MaxDescriptionBytes, DefaultMaxDescriptionBytes, CeilingDescriptionBytes)
	return o
}

// limitOrDefault is v up to ceiling, or def when v is zero or less.
func limitOrDefault(v, def, ceiling int) int {
	if v <= 0 {
		return def
	}
	return min(v, ceiling)
}

// NewService returns a Service over store.
func NewService(store Store, opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.WithDefaults()
	s := &Service{store: store, admins: map[string]bool{},
		limits: Limits{TitleChars: o.MaxTitleChars, DescriptionBytes: o.MaxDescriptionBytes}}
	for _, a := range o.AdminSubjects {
		if a != "" {
			s.admins[a] = true
		}
	}
	return s
}

// Limits returns the limits of item text the Service enforces.
func (s *Service) Limits() Limits { return s.limits }

// IsAdmin reports whether subject is an admin subject.
func (s *Service) IsAdmin(subject string) bool { return s.admins[subject] }

// authorize checks perm on project: ErrNotFound when the project does not exist, ErrForbidden
// without the permission. It returns the actor's role.
func (s *Service) authorize(ctx context.Context, a Actor, project string, perm auth.Perm) (string, error) {
	if err := a.Check(); err != nil {
		return "", err
	}
	role, exists, err := s.store.Role(ctx, project, a.Subject)
	if err != nil {
		return "", fmt.Errorf("role of %s in %s: %w", a.Subject, project, err)
	}
	if !exists {
		return "", fault.Errorf(ErrNotFound, "project %s not found", project)
	}
	if perm == auth.PermManage && s.admins[a.Subject] {
		return role, nil
	}
	if !auth.Role(role).Has(perm) {
		return role, fault.Errorf(ErrForbidden, "%s on project %s is required", perm, project)
	}
	return role, nil
}

// itemProject returns the project of an item key, ErrNotFound for a malformed key.
func itemProject(key string) (string, error) {
	p, _, ok := ParseItemKey(key)
	if !ok {
		return "", fault.Errorf(ErrNotFound, "item %s not found", key)
	}
	return p, nil
}

// Projects lists the projects the actor has a role in (all of them for an admin subject).
func (s *Service) Projects(ctx context.Context, a Actor) ([]Project, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	return s.store.Projects(ctx, a.Subject, s.admins[a.Subject])
}

// Project returns a project the actor can read (or any, for an admin subject).
func (s *Service) Project(ctx context.Context, a Actor, key string) (*Project, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if !s.admins[a.Subject] {
		if _, err := s.authorize(ctx, a, key, auth.PermRead); err != nil {
			return nil, err
		}
	}
	return s.store.Project(ctx, key, a.Subject)
}

// CreateProject creates a project with the actor as its admin; only admin subjects may.
func (s *Service) CreateProject(ctx context.Context, a Actor, key, name string) (*Project, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if !s.admins[a.Subject] {
		return nil, fault.Errorf(ErrForbidden, "only administrators may create projects")
	}
	if err := CheckProject(key, name); err != nil {
		return nil, err
	}
	return s.store.CreateProject(ctx, a, key, name)
}

// SetMember gives subject role in project; project admins and admin subjects may.
func (s *Service) SetMember(ctx context.Context, a Actor, project, subject, role string) (*Member, error) {
	if _, err := s.authorize(ctx, a, project, auth.PermManage); err != nil {
		return nil, err
	}
	if err := CheckMember(subject, role); err != nil {
		return nil, err
	}
	if role == "" {
		return nil, fault.Errorf(ErrInvalid, "role: want viewer, member or admin")
	}
	if err := s.store.SetMember(ctx, a, project, subject, role); err != nil {
		return nil, err
	}
	return &Member{Project: project, Subject: subject, Role: role}, nil
}

// RemoveMember revokes subject's role in project; project admins and admin subjects may.
func (s *Service) RemoveMember(ctx context.Context, a Actor, project, subject string) error {
	if _, err := s.authorize(ctx, a, project, auth.PermManage); err != nil {
		return err
	}
	if err := CheckMember(subject, ""); err != nil {
		return fault.Errorf(ErrNotFound, "%s is not a member of %s", subject, project)
	}
	return s.store.RemoveMember(ctx, a, project, subject)
}

// ListItems returns one page of the project's items passing filter, by number, and the log
// position they are consistent with (see the client recipe).
func (s *Service) ListItems(ctx context.Context, a Actor, project string, filter ItemFilter, page ItemPage) (ItemList, error) {
	if _, err := s.authorize(ctx, a, project, auth.PermRead); err != nil {
		return ItemList{}, err
	}
	if err := filter.Check(); err != nil {
		return ItemList{}, err
	}
	if err := page.Check(); err != nil {
		return ItemList{}, err
	}
	return s.store.Items(ctx, project, filter, page)
}

// GetItem returns an item of a project the actor can read.
func (s *Service) GetItem(ctx context.Context, a Actor, key string) (*Item, error) {
	project, err := itemProject(key)
	if err != nil {
		return nil, err
	}
	if _, err := s.authorize(ctx, a, project, auth.PermRead); err != nil {
		return nil, err
	}
	return s.store.Item(ctx, key)
}

// CreateItem creates an item in project.
func (s *Service) CreateItem(ctx context.Context, a Actor, project string, in ItemInput) (*Item, error) {
	if _, err := s.authorize(ctx, a, project, auth.PermWrite); err != nil {
		return nil, err
	}
	if err := in.Check(); err != nil {
		return nil, err
	}
	if err := s.limits.check(&in.Title, &in.Description); err != nil {
		return nil, err
	}
	return s.store.CreateItem(ctx, a, project, in)
}

// UpdateItem applies patch; with ifVersion set, only to that version (ErrPrecondition).
func (s *Service) UpdateItem(ctx context.Context, a Actor, key string, patch ItemPatch, ifVersion *int64) (*Item, error) {
	project, err := itemProject(key)
	if err != nil {
		return nil, err
	}
	if _, err := s.authorize(ctx, a, project, auth.PermWrite); err != nil {
		return nil, err
	}
	if err := patch.Check(); err != nil {
		return nil, err
	}
	if err := s.limits.check(patch.Title, patch.Description); err != nil {
		return nil, err
	}
	return s.store.UpdateItem(ctx, a, key, patch, ifVersion)
}

// DeleteItem deletes an item and its dependencies; with ifVersion set, only that version.
func (s *Service) DeleteItem(ctx context.Context, a Actor, key string, ifVersion *int64) error {
	project, err := itemProject(key)
	if err != nil {
		return err
	}
	if _, err := s.authorize(ctx, a, project, auth.PermWrite); err != nil {
		return err
	}
	return s.store.DeleteItem(ctx, a, key, ifVersion)
}

// AddDependency records that blocker blocks key and returns key's item; added is false when
// it was recorded already.
func (s *Service) AddDependency(ctx context.Context, a Actor, key, blocker string) (*Item, bool, error) {
	project, err := itemProject(key)
	if err != nil {
		return nil, false, err
	}
	if _, err := s.authorize(ctx, a, project, auth.PermWrite); err != nil {
		return nil, false, err
	}
	if _, err := CheckDependency(key, blocker); err != nil {
		return nil, false, err
	}
	return s.store.AddDependency(ctx, a, key, blocker)
}

// RemoveDependency removes "blocker blocks key" and returns key's item.
func (s *Service) RemoveDependency(ctx context.Context, a Actor, key, blocker string) (*Item, error) {
	project, err := itemProject(key)
	if err != nil {
		return nil, err
	}
	if _, err := s.authorize(ctx, a, project, auth.PermWrite); err != nil {
		return nil, err
	}
	if _, _, ok := ParseItemKey(blocker); !ok {
		return nil, fault.Errorf(ErrNotFound, "%s does not block %s", blocker, key)
	}
	return s.store.RemoveDependency(ctx, a, key, blocker)
}

// ItemExists reports whether the tracker has stored an item, without permission checks (for
// callers that have checked the project's permission).
func (s *Service) ItemExists(ctx context.Context, key string) (bool, error) {
	if _, _, ok := ParseItemKey(key); !ok {
		return false, nil
	}
	_, err := s.store.Item(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case fault.KindOf(err) == fault.NotFound:
		return false, nil
	}
	return false, err
}
