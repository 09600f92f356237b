package auth_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/ballet/gateway/auth"
)

func TestRolePerms(t *testing.T) {
	tests := []struct {
		role                auth.Role
		valid               bool
		read, write, manage bool
	}{
		{auth.RoleViewer, true, true, false, false},
		{auth.RoleMember, true, true, true, false},
		{auth.RoleAdmin, true, true, true, true},
		{"", false, false, false, false},
		{"owner", false, false, false, false},
		{"Admin", false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.role), func(t *testing.T) {
			if got := tt.role.Valid(); got != tt.valid {
				t.Errorf("Valid = %v", got)
			}
			for p, want := range map[auth.Perm]bool{auth.PermRead: tt.read, auth.PermWrite: tt.write, auth.PermManage: tt.manage} {
				if got := tt.role.Has(p); got != want {
					t.Errorf("Has(%s) = %v, want %v", p, got, want)
				}
			}
			if tt.role.Has("tracker.delete") {
				t.Error("Has(unknown permission)")
			}
			r, err := auth.ParseRole(string(tt.role))
			if tt.valid && (err != nil || r != tt.role) {
				t.Errorf("ParseRole = %q, %v", r, err)
			}
			if !tt.valid && !errors.Is(err, auth.ErrInvalidRole) {
				t.Errorf("ParseRole error %v, want ErrInvalidRole", err)
			}
		})
	}
	if got := auth.RoleMember.Perms(); !slices.Equal(got, []auth.Perm{auth.PermRead, auth.PermWrite}) {
		t.Errorf("member perms %v", got)
	}
	if string(auth.PermRead) != "tracker.read" || string(auth.PermWrite) != "tracker.write" || string(auth.PermManage) != "tracker.manage" {
		t.Error("permission names changed")
	}
}
