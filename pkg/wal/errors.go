package wal

import "errors"

// ErrNoWAL is returned when a directory holds no WAL segment, neither
// itself nor as member/wal or wal below it.
var ErrNoWAL = errors.New("no WAL segments (*.wal) found")
