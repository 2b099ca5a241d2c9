// Package release says which Kubernetes and etcd release versions the
// project builds, and is the one place a version a user gives
// (`--kube-apiserver`, `--etcd-version`) is checked before it reaches a
// build script, a lock file or a cache directory.
//
// # What is accepted
//
// A version is MAJOR.MINOR or MAJOR.MINOR.PATCH, decimal digits without
// leading zeros, optionally after one "v" as the module's tags spell it,
// of a minor line the product's table lists, and for a PATCH, one from
// the line's OldestPatch to its NewestPatch: NewestPatch is the newest
// patch release the Go module proxy served when the table was written, so
// a later patch is refused until the table learns of it, instead of
// starting a build that cannot fetch it. MAJOR.MINOR means the line's
// Default. A pre-release is accepted only when it is spelled exactly as
// one of the line's PreReleases (1.38.0-beta.0). Nothing else: no
// trailing dot, no sign, no path separator, no space or shell
// metacharacter, no control character, no invalid UTF-8, at most
// MaxLength bytes.
//
// A version that passes is one the build scripts (scripts/build-etcd.sh,
// scripts/build-kube-apiserver.sh) accept too, so the cache directory it
// names (kube-apiserver-vVERSION, etcd-vVERSION) is one of the script's
// own; the scripts check their argument again with a strict pattern of
// their own (digits and dots, and for Kubernetes a -alpha/-beta/-rc.N
// suffix), since they are also run by hand.
package release

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxLength is the longest version, in bytes, Resolve looks at: the
// longest accepted (1.38.0-beta.0) is 13 bytes.
const MaxLength = 32

// ErrInvalid is returned (wrapped in an *Error) by Resolve for a value
// that is not of the form MAJOR.MINOR[.PATCH].
var ErrInvalid = errors.New("invalid version")

// ErrUnknown is returned (wrapped in an *Error) by Resolve for a
// well-formed version the product's table does not list: a minor line
// lwbench does not build, or a patch outside the line's bounds.
var ErrUnknown = errors.New("unknown release")

// Error is a version Resolve refused. Its message is one line in the words
// of Kubernetes' field errors, quoting the value (Quote): `Invalid value:
// "1.37.": want ...` for ErrInvalid, `Unsupported value: "1.34": ...` for
// ErrUnknown; a command puts the flag in front ("--kube-apiserver: ").
type Error struct {
	// Value is the value given.
	Value string
	// Reason says what is accepted instead.
	Reason string
	// Err is ErrInvalid or ErrUnknown.
	Err error
}

// Error returns the one-line message.
func (e *Error) Error() string {
	kind := "Invalid value"
	if e.Err == ErrUnknown {
		kind = "Unsupported value"
	}
	return kind + ": " + Quote(e.Value) + ": " + e.Reason
}

// Unwrap returns ErrInvalid or ErrUnknown.
func (e *Error) Unwrap() error { return e.Err }

// Line is one minor release line of a product.
type Line struct {
	// Minor is MAJOR.MINOR, "1.37".
	Minor string
	// Default is the release MAJOR.MINOR resolves to: the newest patch
	// release (or, for a line without one yet, pre-release) the module
	// proxy served when the table was written.
	Default string
	// OldestPatch and NewestPatch bound the PATCH of MAJOR.MINOR.PATCH,
	// both included. NewestPatch < OldestPatch: the line has no patch
	// release yet, only its PreReleases.
	OldestPatch, NewestPatch int
	// PreReleases are the pre-release versions accepted, each exactly
	// as spelled here.
	PreReleases []string
}

// Product is a project whose releases lwbench builds from the Go module
// proxy.
type Product struct {
	// Name is how errors name the product: "Kubernetes", "etcd".
	Name string
	// Lines are its minor lines, oldest first.
	Lines []Line
}

// Kubernetes is what `--kube-apiserver` accepts: the kube-apiserver
// releases scripts/build-kube-apiserver.sh builds from k8s.io/kubernetes
// (1.35, 1.36 and 1.37, and 1.38's beta). The newest patches are the
// module proxy's as of 2026-11; 1.38.0-beta.0's go.mod requires Go 1.27.
var Kubernetes = Product{Name: "Kubernetes", Lines: []Line{
	{Minor: "1.35", Default: "1.35.4", OldestPatch: 0, NewestPatch: 4},
	{Minor: "1.36", Default: "1.36.3", OldestPatch: 0, NewestPatch: 3},
	{Minor: "1.37", Default: "1.37.2", OldestPatch: 0, NewestPatch: 2},
	{Minor: "1.38", Default: "1.38.0-beta.0", OldestPatch: 0, NewestPatch: -1, PreReleases: []string{"1.38.0-beta.0"}},
}}

// Etcd is what `--etcd-version` accepts: the releases
// scripts/build-etcd.sh builds from the module proxy (3.5, 3.6, 3.7) and
// 3.4.23, which it takes from Debian's etcd-server package instead (the
// only 3.4 it can have). The newest patches are the module proxy's as of
// 2026-11.
var Etcd = Product{Name: "etcd", Lines: []Line{
	{Minor: "3.4", Default: "3.4.23", OldestPatch: 23, NewestPatch: 23},
	{Minor: "3.5", Default: "3.5.35", OldestPatch: 0, NewestPatch: 35},
	{Minor: "3.6", Default: "3.6.16", OldestPatch: 0, NewestPatch: 16},
	{Minor: "3.7", Default: "3.7.3", OldestPatch: 0, NewestPatch: 3},
}}

// KWOK is the release of sigs.k8s.io/kwok scripts/build-kwok.sh builds for
// the control plane's simulated nodes and pods: v0.8.0, the newest the
// module proxy served as of 2026-11, pinned.
var KWOK = Product{Name: "KWOK", Lines: []Line{
	{Minor: "0.8", Default: "0.8.0", OldestPatch: 0, NewestPatch: 0},
}}

// form is MAJOR.MINOR or MAJOR.MINOR.PATCH, digits without leading zeros.
var form = regexp.MustCompile(`^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3}))?$`)

// Resolve returns the release s names, without a leading "v": s itself
// for MAJOR.MINOR.PATCH or a listed pre-release, the line's Default for
// MAJOR.MINOR. The error is an *Error wrapping ErrInvalid for a value of
// another form and ErrUnknown for a release the table does not list.
func (p Product) Resolve(s string) (string, error) {
	v := strings.TrimPrefix(s, "v")
	if len(s) <= MaxLength {
		for _, l := range p.Lines {
			for _, pre := range l.PreReleases {
				if v == pre {
					return pre, nil
				}
			}
		}
	}
	if len(s) > MaxLength || !form.MatchString(v) {
		return "", &Error{Value: s, Err: ErrInvalid, Reason: "want MAJOR.MINOR or MAJOR.MINOR.PATCH, digits only, of " + p.known()}
	}
	parts := strings.Split(v, ".")
	minor := parts[0] + "." + parts[1]
	for _, l := range p.Lines {
		if l.Minor != minor {
			continue
		}
		if len(parts) == 2 {
			return l.Default, nil
		}
		patch, _ := strconv.Atoi(parts[2]) // at most 4 digits: form
		if patch < l.OldestPatch || patch > l.NewestPatch {
			return "", &Error{Value: s, Err: ErrUnknown,
				Reason: fmt.Sprintf("of %s %s, lwbench builds %s (up to the newest the Go module proxy served when lwbench was written)", p.Name, l.Minor, l.releases())}
		}
		return v, nil
	}
	return "", &Error{Value: s, Err: ErrUnknown, Reason: "lwbench builds " + p.known()}
}

// Help says in a flag's usage what Resolve accepts: "1.35 (1.35.4), 1.36
// (1.36.3), 1.37 (1.37.2) or 1.38 (1.38.0-beta.0), or a MAJOR.MINOR.PATCH
// release of them".
func (p Product) Help() string {
	var lines []string
	for _, l := range p.Lines {
		lines = append(lines, l.Minor+" ("+l.Default+")")
	}
	last := len(lines) - 1
	return strings.Join(lines[:last], ", ") + " or " + lines[last] + ", or a MAJOR.MINOR.PATCH release of them"
}

// known lists the product's lines for an error: "Kubernetes 1.35, 1.36,
// 1.37 or 1.38".
func (p Product) known() string {
	var minors []string
	for _, l := range p.Lines {
		minors = append(minors, l.Minor)
	}
	if len(minors) > 1 {
		return p.Name + " " + strings.Join(minors[:len(minors)-1], ", ") + " or " + minors[len(minors)-1]
	}
	return p.Name + " " + strings.Join(minors, "")
}

// releases lists the releases of line l for an error: "1.37.0 to
// 1.37.2", "3.4.23", "1.38.0-beta.0".
func (l Line) releases() string {
	var s []string
	switch {
	case l.NewestPatch < l.OldestPatch:
	case l.NewestPatch == l.OldestPatch:
		s = append(s, fmt.Sprintf("%s.%d", l.Minor, l.NewestPatch))
	default:
		s = append(s, fmt.Sprintf("%s.%d to %s.%d", l.Minor, l.OldestPatch, l.Minor, l.NewestPatch))
	}
	s = append(s, l.PreReleases...)
	return strings.Join(s, " and ")
}

// Quote returns s quoted for a one-line error message (strconv.Quote:
// control characters and invalid UTF-8 escaped), cut to its first
// MaxLength bytes with its length added when it is longer.
func Quote(s string) string {
	if len(s) <= MaxLength {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:MaxLength]), len(s))
}
