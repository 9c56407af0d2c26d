package faults

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the bare synced insert the local-write target is stated in
)

// SyncProbe times a bare synced SQLite insert — one row per commit, WAL with
// synchronous=FULL, on a file in dir, so on the same disk as the gated SQLite
// store — the unit the issue states the local-write target in ("bare local + one
// bare synced insert + 50 µs").
type SyncProbe struct {
	db *sql.DB
	n  int
}

// NewSyncProbe opens the probe's database in dir.
func NewSyncProbe(ctx context.Context, dir string) (*SyncProbe, error) {
	dsn := "file:" + filepath.Join(dir, "syncprobe.db") + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS probe (k TEXT PRIMARY KEY, v BLOB)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("idemgate/integration/faults: sync probe: %w", err)
	}
	return &SyncProbe{db: db}, nil
}

// Insert returns the mean time of n synced single-row inserts.
func (p *SyncProbe) Insert(ctx context.Context, n int) (time.Duration, error) {
	payload := []byte(strings.Repeat("x", 200))
	start := time.Now()
	for range n {
		p.n++
		if _, err := p.db.ExecContext(ctx, `INSERT INTO probe (k, v) VALUES (?, ?)`, fmt.Sprintf("k%09d", p.n), payload); err != nil {
			return 0, fmt.Errorf("idemgate/integration/faults: sync probe: %w", err)
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// Close closes the probe's database.
func (p *SyncProbe) Close() error { return p.db.Close() }
