package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The commit queue. Every write of this process goes through it: whoever finds
// no commit running takes up to maxBatch queued writes into one BEGIN IMMEDIATE
// transaction, runs them, and commits once — when one of them fails, the
// transaction is rolled back and the batch runs again with each write under its
// own SAVEPOINT (so one failure rolls back that write alone); the writes that queued meanwhile form the next
// batch, led by the oldest of them. Every batch commits with synchronous=NORMAL
// (the write connection never changes it): committed and visible, its frames in
// the WAL but not yet synced. A batch holding a synced write (a claim, a pause, or
// any write under DurabilityStrict) then syncs the WAL file itself before its
// writes return — after the next batch was handed the lock, so the next batch's
// statements run while this one's sync waits for the disk. The other batches are
// on disk after the next synced batch, a checkpoint, or the flusher's sync of the
// WAL at most FlushInterval later.

// maxBatch bounds the writes in one transaction.
const maxBatch = 128

type job struct {
	ctx  context.Context
	op   string
	sync bool
	// mustSync is set by fn (mustSync(ctx)) when what it wrote turned out to need
	// the disk before write returns (store.SentMustSync).
	mustSync bool
	fn       func(context.Context, *sql.Tx) error
	err      error
	turn     chan struct{} // this job's goroutine leads the next batch
	done     chan struct{} // err is set
}

// write runs fn in the next batch and returns its own outcome. sync says the
// commit must be on disk before write returns (a claim or a pause). Errors from
// fn that are store sentinels pass through; the rest are described and classified.
func (s *Store) write(ctx context.Context, op string, sync bool, fn func(context.Context, *sql.Tx) error) error {
	j := &job{op: op, sync: sync, fn: fn, turn: make(chan struct{}, 1), done: make(chan struct{})}
	j.ctx = context.WithValue(ctx, jobKey{}, j)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: %w", op, s.path, store.ErrUnavailable, store.ErrClosed)
	}
	s.queue = append(s.queue, j)
	if !s.committing {
		s.committing = true
		j.turn <- struct{}{}
	}
	s.mu.Unlock()
	select {
	case <-j.done:
	case <-j.turn:
		s.lead()
		<-j.done
	}
	return j.err
}

type jobKey struct{}

// mustSync, called by a write's fn, makes its batch synced before the write
// returns whatever the Durability. It runs on the batch's leader before the
// commit, which reads it after.
func mustSync(ctx context.Context) {
	if j, ok := ctx.Value(jobKey{}).(*job); ok {
		j.mustSync = true
	}
}

// lead commits one batch from the head of the queue (the caller's own job is
// its first) and hands the next batch to the oldest job still queued.
func (s *Store) lead() {
	s.mu.Lock()
	n := min(len(s.queue), maxBatch)
	batch := make([]*job, n)
	copy(batch, s.queue)
	s.queue = s.queue[n:]
	sync := s.strict || s.syncFailed
	for _, j := range batch {
		sync = sync || j.sync
	}
	lost := s.lost
	s.mu.Unlock()

	var committed bool
	if lost != nil {
		// A sync of the WAL failed: the frames written before it may not be on the
		// disk, and a later sync cannot tell (see heal). Nothing commits until what
		// the WAL holds is rewritten into the database file and synced there.
		lost = s.heal()
	}
	if lost != nil {
		for _, j := range batch {
			j.err = fmt.Errorf("idemgate/store/sqlite: %s %s: %w", j.op, s.path, lost)
		}
	} else {
		committed = s.commit(batch)
	}
	for _, j := range batch {
		sync = sync || (j.mustSync && j.err == nil)
	}

	s.mu.Lock()
	var mark int64 // this batch's commit
	if committed {
		s.commits++
		mark = s.commits
		if !sync {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
	syncing := committed && sync
	if syncing {
		s.syncing++ // Close waits for it
	}
	// The next batch runs its statements while this one's sync waits for the disk.
	if len(s.queue) > 0 {
		s.queue[0].turn <- struct{}{}
	} else {
		s.committing = false
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	if syncing {
		err := s.syncTo(mark)
		s.mu.Lock()
		s.syncing--
		s.idle.Broadcast()
		s.mu.Unlock()
		if err != nil {
			// Committed and visible, but maybe never on disk: the writes that were to
			// be synced fail (closed: a claim's caller gives it back).
			for _, j := range batch {
				if j.err == nil {
					j.err = fmt.Errorf("idemgate/store/sqlite: %s %s: %w", j.op, s.path, err)
				}
			}
		}
	}
	for _, j := range batch {
		close(j.done)
	}
}

// syncTo syncs the WAL unless the commit mark is known to be on disk already, and
// then counts every commit made before the sync began as synced (the WAL is
// sequential). A failed sync makes every later commit synced.
func (s *Store) syncTo(mark int64) error {
	// One sync at a time: a sync that overtook a failing one would count frames
	// synced that lie after the ones the failed write-back lost (see heal).
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.lost != nil {
		err := s.lost
		s.mu.Unlock()
		return err
	}
	if s.synced >= mark {
		s.mu.Unlock()
		return nil
	}
	target := s.commits
	s.mu.Unlock()
	err := s.syncWAL()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.syncFailed = true
		if !errors.Is(err, errSyncNotRun) {
			s.lost = s.lostErr(err)
			return s.lost
		}
		return fmt.Errorf("%w: sync the WAL: %w; every later commit is synced; check the disk", store.ErrUnavailable, err)
	}
	if s.lost != nil {
		// A sync failed meanwhile: this one's success does not cover the frames
		// written before that failure (see heal).
		return s.lost
	}
	s.synced = max(s.synced, target)
	return nil
}

// errSyncNotRun marks a sync of the WAL that failed before it reached the disk
// (the file could not be opened): nothing written was lost by it, and the next
// sync covers every frame.
var errSyncNotRun = errors.New("the WAL file could not be opened to sync it")

// lostErr is the error of every write after a failed sync of the WAL, until heal
// rewrites what the WAL holds.
func (s *Store) lostErr(err error) error {
	return fmt.Errorf("%w: a sync of the WAL of %s failed (%w): the commits written before it may never reach the disk, "+
		"and a later sync cannot tell (the kernel reports a failed write-back once); writes are refused until the "+
		"WAL is rewritten into the database file and synced there. Next step: check the disk (dmesg, free space); "+
		"the store retries at each write", store.ErrUnavailable, s.path, err)
}

// heal rewrites every committed frame of the WAL into the database file, syncs
// that file and truncates the WAL (a TRUNCATE checkpoint; SQLite syncs the WAL
// before and the database file after it), after a sync of the WAL failed. A
// failed fsync reports the write-back error once; the pages it failed to write
// stay in the page cache, readable, but may never reach the disk, and a later
// fsync succeeds over them. A commit synced after it would lie behind a hole in
// the WAL, and an operating-system crash would lose it with the hole (recovery
// stops at the first frame that does not check out): a claim lost so lets a
// retry claim the key afresh and send again. The checkpoint writes the frames
// anew, from the page cache, into the database file. It runs on the write
// connection, from lead, so no batch commits meanwhile. It returns nil once every
// commit is on disk, or the error that keeps the writes refused.
func (s *Store) heal() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	var busy, logged, moved int
	err := s.w.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && busy != 0 {
		err = fmt.Errorf("the checkpoint that rewrites it was blocked by another connection or process (%d of %d frames moved)", moved, logged)
	}
	if err != nil {
		return fmt.Errorf("%w; the rewrite of the WAL failed: %w", s.lost, err)
	}
	s.lost = nil
	s.synced = s.commits
	return nil
}

// commit runs batch in one transaction and sets every job's err. It reports
// whether a transaction that wrote was committed (not synced: see lead).
func (s *Store) commit(batch []*job) bool {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = s.fail(j.op, err)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return false
	}
	fail := func(err error) bool {
		for _, j := range live {
			if j.err == nil {
				j.err = s.fail(j.op, err)
			}
		}
		return false
	}
	// Statements run without the callers' cancellation: an interrupted statement
	// can roll back the whole transaction, and with it the neighbours' writes.
	// The caller's context is checked above, before its write starts.
	bg := context.Background()
	tx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		return fail(err)
	}
	if len(live) > 1 {
		// The common case first: every write succeeds, and none needs a savepoint
		// (two statements each). When one fails, the whole transaction is rolled
		// back and the batch runs again below, each write under its own savepoint;
		// the writes' functions only assign their outputs, so running one again is
		// the same as running it once.
		plain := true
		for _, j := range live {
			if err := j.fn(context.WithoutCancel(j.ctx), tx); err != nil {
				plain = false
				break
			}
		}
		if plain {
			if s.beforeCommit != nil {
				s.beforeCommit(tx, len(live))
			}
			if err := tx.Commit(); err != nil {
				return fail(err)
			}
			return true
		}
		s.mu.Lock()
		s.retried++
		s.mu.Unlock()
		if err := tx.Rollback(); err != nil {
			return fail(err)
		}
		if tx, err = s.w.BeginTx(bg, nil); err != nil {
			return fail(err)
		}
	}
	ok := 0
	for i, j := range live {
		ctx := context.WithoutCancel(j.ctx)
		if len(live) == 1 {
			if j.err = j.fn(ctx, tx); j.err != nil {
				_ = tx.Rollback()
				j.err = s.classify(j.op, j.err)
				return false
			}
			ok++
			break
		}
		sp := "w" + strconv.Itoa(i)
		if _, err := tx.ExecContext(bg, "SAVEPOINT "+sp); err != nil {
			_ = tx.Rollback()
			return fail(err)
		}
		if j.err = j.fn(ctx, tx); j.err != nil {
			j.err = s.classify(j.op, j.err)
			if _, err := tx.ExecContext(bg, "ROLLBACK TO "+sp); err != nil {
				_ = tx.Rollback()
				return fail(err)
			}
		} else {
			ok++
		}
		if _, err := tx.ExecContext(bg, "RELEASE "+sp); err != nil {
			_ = tx.Rollback()
			return fail(err)
		}
	}
	if ok == 0 {
		_ = tx.Rollback()
		return false
	}
	if s.beforeCommit != nil {
		s.beforeCommit(tx, len(live))
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return true
}

// classify passes the store sentinels through and describes the rest.
func (s *Store) classify(op string, err error) error {
	if errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.fail(op, err)
}

// flusher syncs the WAL at most FlushInterval after a commit that was not
// synced, unless a synced commit came first, until stop closes.
func (s *Store) flusher(every time.Duration) {
	defer close(s.flushed)
	t := time.NewTimer(every)
	t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		}
		t.Reset(every)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		_ = s.flush()
	}
}

// flush syncs the WAL when a commit is not on disk yet. A failed sync makes
// every later commit synced before it returns, since the unsynced commits may
// never reach the disk.
func (s *Store) flush() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	target := s.commits
	if s.synced >= target {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	err := s.syncWAL()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.syncFailed = true
		if !errors.Is(err, errSyncNotRun) {
			s.lost = s.lostErr(err)
			return fmt.Errorf("idemgate/store/sqlite: %w", s.lost)
		}
		return fmt.Errorf("idemgate/store/sqlite: sync the WAL of %s: %w: %w; every later commit is synced; check the disk", s.path, store.ErrUnavailable, err)
	}
	if s.lost != nil {
		return fmt.Errorf("idemgate/store/sqlite: %w", s.lost)
	}
	s.synced = max(s.synced, target)
	s.flushes++
	return nil
}

// syncWAL makes the -wal file's written frames durable. fsync covers every
// write to the file, through any descriptor, by this process or another.
func syncWAL(path string) error {
	f, err := os.Open(path + "-wal")
	if errors.Is(err, os.ErrNotExist) {
		return nil // checkpointed and removed: the frames are in the database file, synced
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errSyncNotRun, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
