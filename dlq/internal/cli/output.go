package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// jsonLine writes v as one line of JSON (HTML characters not escaped).
func jsonLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// row writes one table row; cells are cleaned to one line each.
func row(tw io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// cell makes untrusted text (keys, error messages from destinations) safe for
// one table cell on a terminal: control characters, escape sequences
// included, are shown escaped; tabs and newlines become spaces; "" is "-".
func cell(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
	return escapeControls(s, false)
}

// block makes untrusted multi-line text (a body) safe for a terminal: like
// cell, but newlines and tabs stay.
func block(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLines bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			b.WriteString(`\x` + fmt.Sprintf("%02x", s[i]))
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func validAt(s string, i int) bool {
	r, size := utf8.DecodeRuneInString(s[i:])
	return r != utf8.RuneError || size > 1
}

// short cuts s to n runes, with an ellipsis.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// when renders a time for tables: UTC, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago renders a duration for people: 3d4h, 5h12m, 3m20s, 2.5s.
func ago(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	d = d.Round(time.Second)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, (d%time.Hour)/time.Minute)
	}
	return d.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
