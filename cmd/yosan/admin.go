package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"strings"

	"yosan/app"
	"yosan/db"
	"yosan/web"
)

const adminUsage = `usage: yosan admin create-user --email E --name N [--operator] [--org ORG --role ROLE [--team TEAM]]
       yosan admin set-password --email E

The password is read from the first line of standard input, so it stays out of the shell
history and the process list:  yosan admin set-password --email ann@example.com < password.txt
ROLE is owner, finance_admin, team_admin (with --team) or viewer; ORG and TEAM are ids.`

// cliActor names the command line in the audit log.
const cliActor = "yosan admin (command line)"

// adminCmd runs `yosan admin <create-user|set-password>` against DATABASE_URL, reading the
// password from stdin and writing the result to out. Arguments and the password are checked
// before the database is touched.
func adminCmd(args []string, stdin io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(adminUsage)
	}
	fs := flag.NewFlagSet("admin "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	email := fs.String("email", "", "the user's email")
	var name, org, role, team *string
	var operator *bool
	switch args[0] {
	case "create-user":
		name = fs.String("name", "", "the user's name")
		operator = fs.Bool("operator", false, "the user runs the gateway: every org, every action")
		org = fs.String("org", "", "an org id to give the user a role in")
		role = fs.String("role", "", "the role in --org")
		team = fs.String("team", "", "the team of a team_admin")
	case "set-password":
	default:
		return fmt.Errorf("unknown admin command %q\n%s", args[0], adminUsage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w\n%s", err, adminUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the password is read from standard input, never from arguments\n%s", fs.Arg(0), adminUsage)
	}
	if strings.TrimSpace(*email) == "" {
		return errors.New("--email is required")
	}
	var m *app.Membership
	if args[0] == "create-user" {
		if a, err := mail.ParseAddress(*email); err != nil || a.Address != strings.TrimSpace(*email) {
			return fmt.Errorf("--email %q is not an email address such as ann@example.com", *email)
		}
		if strings.TrimSpace(*name) == "" {
			return errors.New("--name is required")
		}
		var err error
		if m, err = membershipFlags(*org, *role, *team); err != nil {
			return err
		}
	}
	pw, err := readPassword(stdin)
	if err != nil {
		return err
	}
	hash, err := web.HashPassword(pw)
	if err != nil {
		return err
	}

	env, err := openCommand()
	if err != nil {
		return err
	}
	defer env.close()
	ctx, d := env.ctx, env.db
	if args[0] == "set-password" {
		return setPassword(ctx, d, *email, hash, out)
	}
	return createUser(ctx, d, *email, *name, hash, *operator, m, out)
}

// membershipFlags checks --org, --role and --team together; nil when no role is given.
func membershipFlags(org, role, team string) (*app.Membership, error) {
	switch {
	case org == "" && role == "" && team == "":
		return nil, nil
	case org == "" || role == "":
		return nil, errors.New("--org and --role go together")
	case !app.ValidRole(app.Role(role)):
		return nil, fmt.Errorf("--role %q: want owner, finance_admin, team_admin or viewer", role)
	case role == string(app.RoleTeamAdmin) && team == "":
		return nil, errors.New("--role team_admin needs --team")
	case role != string(app.RoleTeamAdmin) && team != "":
		return nil, fmt.Errorf("--team is only for --role team_admin; a %s acts on the whole org", role)
	}
	return &app.Membership{OrgID: org, Role: app.Role(role), TeamID: team}, nil
}

// readPassword reads the first line of r (without its line ending) and validates it.
func readPassword(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), 4096)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("read the password from standard input: %w", err)
		}
		return "", errors.New("no password on standard input: pipe it in, e.g. `yosan admin ... < password.txt`")
	}
	pw := strings.TrimSuffix(sc.Text(), "\r")
	if pw == "" {
		return "", errors.New("the password (the first line of standard input) is empty")
	}
	if err := app.ValidPassword(pw); err != nil {
		return "", errors.New(app.ErrorMessage(err))
	}
	return pw, nil
}

func createUser(ctx context.Context, d *db.DB, email, name, hash string, operator bool, m *app.Membership, out io.Writer) error {
	// Check the org and team first, so a typo does not leave a user without its role.
	if m != nil {
		if _, err := d.Org(ctx, m.OrgID); err != nil {
			return err
		}
		if m.TeamID != "" {
			if _, err := d.Team(ctx, m.OrgID, m.TeamID); err != nil {
				return err
			}
		}
	}
	u, err := d.CreateUser(ctx, email, name, hash, operator)
	if err != nil {
		return err
	}
	if err := d.Audit(ctx, db.AuditEntry{Actor: cliActor, Action: "user.create", TargetKind: "user", TargetID: u.ID,
		Details: map[string]any{"email": u.Email, "operator": u.Operator}}); err != nil {
		return fmt.Errorf("user %s created, but the audit log failed: %w", u.ID, err)
	}
	if m != nil {
		m.UserID = u.ID
		if err := d.SetMembership(ctx, *m); err != nil {
			return fmt.Errorf("user %s created, but its role was not set: %w", u.ID, err)
		}
		details := map[string]any{"email": u.Email, "role": string(m.Role)}
		if m.TeamID != "" {
			details["team_id"] = m.TeamID
		}
		if err := d.Audit(ctx, db.AuditEntry{Actor: cliActor, OrgID: m.OrgID, Action: "membership.set", TargetKind: "user",
			TargetID: u.ID, Details: details}); err != nil {
			return fmt.Errorf("user %s created with its role, but the audit log failed: %w", u.ID, err)
		}
	}
	fmt.Fprintln(out, u.ID)
	return nil
}

func setPassword(ctx context.Context, d *db.DB, email, hash string, out io.Writer) error {
	u, _, err := d.UserByEmail(ctx, email)
	if err != nil {
		return err
	}
	if err := d.SetPassword(ctx, u.ID, hash); err != nil {
		return err
	}
	if err := d.Audit(ctx, db.AuditEntry{Actor: cliActor, Action: "user.password_set", TargetKind: "user", TargetID: u.ID,
		Details: map[string]any{"email": u.Email}}); err != nil {
		return fmt.Errorf("password set, but the audit log failed: %w", err)
	}
	fmt.Fprintf(out, "password set for %s; every session of the user was ended\n", u.Email)
	return nil
}
