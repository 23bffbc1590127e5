// Package migrations embeds the numbered SQL migrations that golang-migrate applies.
package migrations

import "embed"

// FS holds the *.up.sql and *.down.sql files.
//
//go:embed *.sql
var FS embed.FS
