package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
	"yosan/web"
)

const adminTestPassword = "correct horse battery staple"

func runAdmin(stdin string, args ...string) (string, error) {
	var out bytes.Buffer
	err := adminCmd(args, strings.NewReader(stdin), &out)
	return out.String(), err
}

func TestAdminCmdArgs(t *testing.T) {
	// No database: every one of these must fail before connecting.
	t.Setenv("DATABASE_URL", "")
	t.Setenv("YOSAN_CONFIG", "")
	org, team := uuid.NewString(), uuid.NewString()
	pw := adminTestPassword + "\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"NoCommand", pw, nil, "usage: yosan admin"},
		{"UnknownCommand", pw, []string{"delete-user", "--email", "a@example.com"}, `unknown admin command "delete-user"`},
		{"UnknownFlag", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--admin"}, "flag provided but not defined"},
		{"FlagOfOtherCommand", pw, []string{"set-password", "--email", "a@example.com", "--operator"}, "flag provided but not defined"},
		{"PasswordAsArgument", pw, []string{"set-password", "--email", "a@example.com", "hunter2hunter2"}, "read from standard input, never from arguments"},
		{"NoEmail", pw, []string{"create-user", "--name", "A"}, "--email is required"},
		{"BadEmail", pw, []string{"create-user", "--email", "not-an-email", "--name", "A"}, "is not an email address"},
		{"NoName", pw, []string{"create-user", "--email", "a@example.com"}, "--name is required"},
		{"RoleWithoutOrg", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--role", "owner"}, "--org and --role go together"},
		{"OrgWithoutRole", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--org", org}, "--org and --role go together"},
		{"UnknownRole", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--org", org, "--role", "admin"}, `--role "admin"`},
		{"TeamAdminWithoutTeam", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--org", org, "--role", "team_admin"}, "needs --team"},
		{"TeamForOwner", pw, []string{"create-user", "--email", "a@example.com", "--name", "A", "--org", org, "--role", "owner", "--team", team}, "--team is only for --role team_admin"},
		{"NoStdin", "", []string{"set-password", "--email", "a@example.com"}, "no password on standard input"},
		{"EmptyLine", "\nsecond line is not read\n", []string{"set-password", "--email", "a@example.com"}, "is empty"},
		{"ShortPassword", "short\n", []string{"set-password", "--email", "a@example.com"}, "too short"},
		{"RepeatedPassword", strings.Repeat("x", 20) + "\n", []string{"set-password", "--email", "a@example.com"}, "one character repeated"},
		{"HugeLine", strings.Repeat("ab", 5000), []string{"set-password", "--email", "a@example.com"}, "read the password"},
		{"ValidButNoDatabase", pw, []string{"create-user", "--email", "a@example.com", "--name", "A"}, "DATABASE_URL is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runAdmin(tt.stdin, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("wrote %q", out)
			}
		})
	}
}

func TestAdminCmdRun(t *testing.T) {
	ctx := context.Background()
	url := dbtest.NewURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("YOSAN_CONFIG", "")
	d, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	org, err := d.CreateOrg(ctx, app.Org{Name: "acme", Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		t.Fatal(err)
	}
	team, err := d.CreateTeam(ctx, org.ID, "platform")
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.CreateOrg(ctx, app.Org{Name: "globex", Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		t.Fatal(err)
	}
	otherTeam, err := d.CreateTeam(ctx, other.ID, "ops")
	if err != nil {
		t.Fatal(err)
	}
	// create runs create-user and returns the new user's id, checking the password was stored.
	create := func(t *testing.T, email, pw string, args ...string) string {
		t.Helper()
		out, err := runAdmin(pw+"\r\nignored\n", append([]string{"create-user", "--email", email, "--name", "Someone"}, args...)...)
		if err != nil {
			t.Fatalf("create-user: %v", err)
		}
		id := strings.TrimSpace(out)
		if uuid.Validate(id) != nil || out != id+"\n" {
			t.Fatalf("output %q: want the user id alone", out)
		}
		u, hash, err := d.UserByEmail(ctx, email)
		if err != nil || u.ID != id {
			t.Fatalf("stored user %+v, %v", u, err)
		}
		if ok, err := web.CheckPassword(hash, pw); err != nil || !ok {
			t.Errorf("the password from stdin does not check: %v", err)
		}
		return id
	}

	t.Run("Operator", func(t *testing.T) {
		id := create(t, "Root@Example.com", adminTestPassword, "--operator")
		p, err := d.Actor(ctx, id)
		if err != nil || !p.User.Operator || p.User.Email != "root@example.com" || len(p.Memberships) != 0 {
			t.Errorf("operator %+v, %v", p, err)
		}
	})
	t.Run("Owner", func(t *testing.T) {
		id := create(t, "owner@example.com", adminTestPassword, "--org", org.ID, "--role", "owner")
		p, err := d.Actor(ctx, id)
		if err != nil || p.User.Operator || len(p.Memberships) != 1 || p.Memberships[0].Role != app.RoleOwner || p.Memberships[0].OrgID != org.ID {
			t.Errorf("owner %+v, %v", p, err)
		}
		log, err := d.AuditLog(ctx, org.ID, 0, 0)
		if err != nil || len(log) != 1 || log[0].Action != "membership.set" || log[0].TargetID != id || log[0].Actor != cliActor {
			t.Errorf("org audit log %+v, %v", log, err)
		}
	})
	t.Run("TeamAdmin", func(t *testing.T) {
		id := create(t, "lead@example.com", adminTestPassword, "--org", org.ID, "--role", "team_admin", "--team", team.ID)
		p, err := d.Actor(ctx, id)
		if err != nil || len(p.Memberships) != 1 || p.Memberships[0].TeamID != team.ID {
			t.Errorf("team admin %+v, %v", p, err)
		}
	})
	t.Run("DuplicateEmail", func(t *testing.T) {
		_, err := runAdmin(adminTestPassword+"\n", "create-user", "--email", "OWNER@example.com", "--name", "Again")
		if app.ErrorCode(err) != app.ECONFLICT {
			t.Errorf("err = %v, want conflict", err)
		}
	})
	refused := []struct {
		name string
		args []string
	}{
		{"UnknownOrg", []string{"--org", uuid.NewString(), "--role", "viewer"}},
		{"TeamOfOtherOrg", []string{"--org", org.ID, "--role", "team_admin", "--team", otherTeam.ID}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			email := strings.ToLower(tt.name) + "@example.com"
			_, err := runAdmin(adminTestPassword+"\n", append([]string{"create-user", "--email", email, "--name", "X"}, tt.args...)...)
			if app.ErrorCode(err) != app.ENOTFOUND {
				t.Fatalf("err = %v, want not found", err)
			}
			if _, _, err := d.UserByEmail(ctx, email); app.ErrorCode(err) != app.ENOTFOUND {
				t.Errorf("a user was created without its role: %v", err)
			}
		})
	}
	t.Run("SetPassword", func(t *testing.T) {
		u, _, err := d.UserByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		sess, err := d.CreateSession(ctx, u.ID, time.Hour, "", "")
		if err != nil {
			t.Fatal(err)
		}
		const newPassword = "a much better passphrase"
		out, err := runAdmin(newPassword+"\n", "set-password", "--email", "Owner@Example.com")
		if err != nil || !strings.Contains(out, "password set for owner@example.com") {
			t.Fatalf("set-password: %q, %v", out, err)
		}
		_, hash, _ := d.UserByEmail(ctx, u.Email)
		if ok, _ := web.CheckPassword(hash, newPassword); !ok {
			t.Error("the new password does not check")
		}
		if ok, _ := web.CheckPassword(hash, adminTestPassword); ok {
			t.Error("the old password still checks")
		}
		if _, err := d.ActiveSession(ctx, sess.ID); app.ErrorCode(err) != app.EUNAUTHORIZED {
			t.Errorf("the user's session survived the password change: %v", err)
		}
		log, _ := d.AuditLog(ctx, "", 1, 0)
		if len(log) != 1 || log[0].Action != "user.password_set" || log[0].TargetID != u.ID {
			t.Errorf("audit log %+v", log)
		}
	})
	t.Run("SetPasswordUnknownUser", func(t *testing.T) {
		_, err := runAdmin(adminTestPassword+"\n", "set-password", "--email", "nobody@example.com")
		if app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("err = %v, want not found", err)
		}
	})
}
