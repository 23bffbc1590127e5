package views

import (
	"fmt"

	"github.com/a-h/templ"
)

// Shell is what every console page's frame shows: who is signed in, the orgs they may open,
// the section of the current page, and the CSRF token every form carries.
type Shell struct {
	Title   string
	Section string
	// UserEmail is the signed-in user ("" on the sign-in and setup pages).
	UserEmail string
	Operator  bool
	Orgs      []OrgLink
	// Org is the org the page is about (nil for pages above orgs).
	Org  *OrgLink
	CSRF string
	// Flash is a one-time message after a redirect; FlashError marks it as an error.
	Flash      string
	FlashError bool
	// Nav lists the sections this user may open in Org.
	Nav []NavItem
}

// OrgLink names an org the user may open, with their role in it.
type OrgLink struct {
	ID, Name, Role string
}

// NavItem is one entry of the console's navigation.
type NavItem struct {
	Section, Label, Href string
}

func barClass(pct float64) string {
	switch {
	case pct >= 100:
		return "bad"
	case pct >= 80:
		return "warn"
	}
	return ""
}

func barWidth(pct float64) templ.SafeCSS {
	w := pct
	if w > 100 {
		w = 100
	}
	if w < 0 {
		w = 0
	}
	return templ.SafeCSS(fmt.Sprintf("width:%.1f%%", w))
}

func pctLabel(pct float64) string { return fmt.Sprintf("%.1f%% of the cap used", pct) }
