package auth

import (
	"errors"
	"fmt"
)

// Perm is a permission on a project.
type Perm string

// Permissions of the tracker.
const (
	PermRead   Perm = "tracker.read"
	PermWrite  Perm = "tracker.write"
	PermManage Perm = "tracker.manage"
)

// Role is a project member's role; it grants a fixed set of permissions.
type Role string

// Roles: a viewer reads, a member reads and writes, an admin also manages.
const (
	RoleViewer Role = "viewer"
	RoleMember Role = "member"
	RoleAdmin  Role = "admin"
)

// ErrInvalidRole is returned by ParseRole for an unknown role name.
var ErrInvalidRole = errors.New("auth: invalid role")

var rolePerms = map[Role][]Perm{
	RoleViewer: {PermRead},
	RoleMember: {PermRead, PermWrite},
	RoleAdmin:  {PermRead, PermWrite, PermManage},
}

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool {
	_, ok := rolePerms[r]
	return ok
}

// Has reports whether r grants p. An invalid role grants nothing.
func (r Role) Has(p Perm) bool {
	for _, q := range rolePerms[r] {
		if q == p {
			return true
		}
	}
	return false
}

// Perms returns the permissions r grants, in the order read, write, manage.
func (r Role) Perms() []Perm {
	return append([]Perm(nil), rolePerms[r]...)
}

// ParseRole returns the role named s; the error wraps ErrInvalidRole.
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.Valid() {
		return r, nil
	}
	return "", fmt.Errorf("%w %q (want viewer, member or admin)", ErrInvalidRole, s)
}
