package main

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/sqlite"
)

// fillChunk is how many rows one fill transaction inserts into each table.
const fillChunk = 500_000

// fillBench measures a claim on a store holding n records and n receipts against
// a claim on an empty store of the same backend, on the same disk or server, in
// alternating rounds. The filled store is loaded by INSERT … SELECT in big
// transactions straight into its tables, not through Begin. Keys, the fill's and
// the claims', are spread over the whole key space (a hash prefix), as real keys
// are, so a claim lands on a random leaf of each key-ordered tree.
func fillBench(ctx context.Context, n int) {
	fmt.Printf("claim on a store holding %d records and %d receipts vs an empty store, 1 worker, %v per measurement in %d rounds\n\n", n, n, *dur, *rounds)
	fmt.Println("| backend | stored records + receipts | fill time | full µs/claim | empty µs/claim | full/empty (all) | full/empty (median round) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	if *backend == "sqlite" || *backend == "all" {
		dir, err := os.MkdirTemp("", "storebench-fill")
		if err != nil {
			log.Fatal(err)
		}
		emptyPath, fullPath := filepath.Join(dir, "empty.db"), filepath.Join(dir, "full.db")
		reuse := false
		if *path != "" {
			// -path keeps the filled store: a later run with the same -path and
			// -fill reuses it instead of filling again (a fill of 10 million takes
			// minutes).
			fullPath = *path
			_, err := os.Stat(fullPath)
			reuse = err == nil
		}
		empty, err := sqlite.Open(ctx, emptyPath)
		must(err)
		full, err := sqlite.Open(ctx, fullPath)
		must(err)
		start := time.Now()
		if reuse {
			sqliteReuse(ctx, fullPath, n)
		} else {
			sqliteFill(ctx, fullPath, n)
		}
		fillCompare(ctx, "SQLite", n, time.Since(start), full, empty)
		if *queries {
			queryBench(ctx, "SQLite", n, full)
		}
		if *prune {
			// The prune runs on a store of its own, as `idemgate receipts prune` runs
			// in a process of its own.
			op, err := sqlite.Open(ctx, fullPath)
			must(err)
			pruneBench(ctx, "SQLite", n, full, op)
			op.Close()
		}
		full.Close()
		empty.Close()
		if *path != "" {
			must(os.RemoveAll(emptyPath))
			fmt.Printf("\nthe filled store stays at %s (-path): run again with it to reuse it\n", fullPath)
		}
		must(os.RemoveAll(dir))
	}
	if *backend == "postgres" || *backend == "all" {
		emptyDSN, dropEmpty := pgSchema(ctx, "storebench_empty_"+runID)
		var (
			fullDSN  string
			dropFull func()
			reuse    bool
		)
		if *pgKeep != "" {
			// -pg-schema keeps the filled store in that schema: a later run with the
			// same -pg-schema and -fill reuses it.
			fullDSN, reuse = pgKeptSchema(ctx, *pgKeep)
			dropFull = func() {}
		} else {
			fullDSN, dropFull = pgSchema(ctx, "storebench_full_"+runID)
		}
		empty, err := postgres.OpenWith(ctx, emptyDSN, postgres.Options{MaxConns: 1})
		must(err)
		full, err := postgres.OpenWith(ctx, fullDSN, postgres.Options{MaxConns: 1})
		must(err)
		start := time.Now()
		if reuse {
			pgReuse(ctx, fullDSN, n)
		} else {
			pgFill(ctx, fullDSN, n)
		}
		fillCompare(ctx, "PostgreSQL", n, time.Since(start), full, empty)
		if *queries {
			queryBench(ctx, "PostgreSQL", n, full)
		}
		if *prune {
			op, err := postgres.OpenWith(ctx, fullDSN, postgres.Options{MaxConns: 1})
			must(err)
			pruneBench(ctx, "PostgreSQL", n, full, op)
			op.Close()
		}
		full.Close()
		empty.Close()
		dropFull()
		dropEmpty()
	}
}

// spreadKey puts key at a random-looking place in the key space.
func spreadKey(key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("%08x/%s", h.Sum32(), key)
}

func fillCompare(ctx context.Context, name string, n int, fillTime time.Duration, full, empty store.Store) {
	claimOn := func(s store.Store) func(context.Context, string) error {
		return func(ctx context.Context, key string) error {
			o, _, err := s.Begin(ctx, claimFor(spreadKey(key)))
			if err == nil && o != store.OutcomeClaimed {
				err = fmt.Errorf("Begin(%s) = %s", key, o)
			}
			return err
		}
	}
	tag := name + "-fill"
	run(ctx, 1, 500*time.Millisecond, tag+"/warm-full", claimOn(full))
	run(ctx, 1, 500*time.Millisecond, tag+"/warm-empty", claimOn(empty))
	var fn, en int64
	var fd, ed time.Duration
	var ratios []float64
	per := *dur / time.Duration(*rounds)
	for r := range *rounds {
		var n1, n2 int64
		var d1, d2 time.Duration
		if r%2 == 0 {
			n1, d1 = run(ctx, 1, per, fmt.Sprintf("%s/full/%d", tag, r), claimOn(full))
			n2, d2 = run(ctx, 1, per, fmt.Sprintf("%s/empty/%d", tag, r), claimOn(empty))
		} else {
			n2, d2 = run(ctx, 1, per, fmt.Sprintf("%s/empty/%d", tag, r), claimOn(empty))
			n1, d1 = run(ctx, 1, per, fmt.Sprintf("%s/full/%d", tag, r), claimOn(full))
		}
		fn, fd, en, ed = fn+n1, fd+d1, en+n2, ed+d2
		ratios = append(ratios, (d1.Seconds()/float64(n1))/(d2.Seconds()/float64(n2)))
	}
	sort.Float64s(ratios)
	fus, eus := fd.Seconds()*1e6/float64(fn), ed.Seconds()*1e6/float64(en)
	fmt.Printf("| %s | %d + %d | %s | %.0f | %.0f | %.2fx | %.2fx |\n", name, n, n, fillTime.Round(time.Second), fus, eus, fus/eus, ratios[len(ratios)/2])
}

// fillStep is the i-th key of the fill: n keys evenly spread over the 32-bit
// prefix space, in ascending order, so that the fill appends to every key-ordered
// tree while the claims' hashed keys fall between them.
func fillStep(n int) int64 { return (int64(1) << 32) / int64(n) }

// sqliteFill inserts n records and n receipts into the store file at path, in
// transactions of fillChunk rows per table, through a connection of its own.
func sqliteFill(ctx context.Context, path string, n int) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(OFF)&_pragma=cache_size(-262144)")
	must(err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	base := t0.Add(-24 * time.Hour).UnixMicro()
	spacing := int64(24*time.Hour/time.Microsecond) / int64(n) // the receipts of the past day
	for lo := 0; lo < n; lo += fillChunk {
		hi := min(lo+fillChunk, n) - 1
		tx, err := db.BeginTx(ctx, nil)
		must(err)
		gen := `WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2) `
		key := `printf('%08x', i * ?3) || '/fill/' || i`
		_, err = tx.ExecContext(ctx, `INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease,
			result, result_omitted, workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent) `+gen+`
			SELECT `+key+`, 'ChargeCard', 'destructive', '3f2a9c0b7d1e', ?4, 'completed', 'fill#' || i, ?6 + i * ?7 + 60000000,
				?5, 0, 'fill-wf-' || printf('%010d', i), ?8, 1, 1, ?6 + i * ?7, ?6 + i * ?7, ?9, 0 FROM s`,
			lo, hi, fillStep(n), args, result, base, spacing, runID, t0.Add(30*24*time.Hour).UnixMicro())
		must(err)
		// The receipt ID is its time in microseconds, as the store gives it (schema
		// version 10: time-ordered IDs).
		_, err = tx.ExecContext(ctx, `INSERT INTO idemgate_receipts (id, time, key, activity, effect, decision, args_hash, call,
			workflow_id, run_id, attempt, result_ref, error, actor, reason, resolution) `+gen+`
			SELECT ?4 + i * ?5, ?4 + i * ?5, `+key+`, 'ChargeCard', 'destructive', 'ran', '3f2a9c0b7d1e', NULL,
				'fill-wf-' || printf('%010d', i), ?6, 1, 'sha256:9b1f', '', '', '', '' FROM s`,
			lo, hi, fillStep(n), base, spacing, runID)
		must(err)
		must(tx.Commit())
	}
	var busy, frames, done int
	must(db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done))
	var recs, rcpts int
	must(db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM idemgate_records), (SELECT count(*) FROM idemgate_receipts)").Scan(&recs, &rcpts))
	checkFill(recs, rcpts, n)
}

// fillT0 sets t0 to the time the fill of n at dsn or path was made for: the
// fill's last receipt (the workflow of step n-1) is one step before it. A reused
// store's queries ("the last hour") then mean what they meant after its fill.
func fillT0(last time.Time, n int) {
	t0 = last.Add(24 * time.Hour / time.Duration(n)).UTC()
	fmt.Printf("reusing a filled store: its fill was made for %s\n\n", t0.Format(time.RFC3339))
}

// sqliteReuse checks that the store at path holds a fill of n, and sets t0 to it.
func sqliteReuse(ctx context.Context, path string, n int) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	must(err)
	defer db.Close()
	var recs, rcpts int
	must(db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM idemgate_records), (SELECT count(*) FROM idemgate_receipts)").Scan(&recs, &rcpts))
	if recs < n || rcpts < n {
		log.Fatalf("reuse %s: %d records and %d receipts, want a fill of %d", path, recs, rcpts, n)
	}
	var us int64
	must(db.QueryRowContext(ctx, "SELECT time FROM idemgate_receipts WHERE workflow_id = ?", fmt.Sprintf("fill-wf-%010d", n-1)).Scan(&us))
	fillT0(time.UnixMicro(us), n)
}

// pgKeptSchema returns the DSN of schema name, creating the schema when it is
// missing, and whether it held one already.
func pgKeptSchema(ctx context.Context, name string) (string, bool) {
	conn, err := pgx.Connect(ctx, pgDSN())
	must(err)
	var exists bool
	must(conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists))
	if !exists {
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize())
		must(err)
	}
	conn.Close(ctx)
	u, err := url.Parse(pgDSN())
	must(err)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), exists
}

// pgReuse checks that the schema of dsn holds a fill of n, and sets t0 to it.
func pgReuse(ctx context.Context, dsn string, n int) {
	conn, err := pgx.Connect(ctx, dsn)
	must(err)
	defer conn.Close(ctx)
	var recs, rcpts int
	must(conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM idemgate_records), (SELECT count(*) FROM idemgate_receipts)").Scan(&recs, &rcpts))
	if recs < n || rcpts < n {
		log.Fatalf("reuse: %d records and %d receipts, want a fill of %d", recs, rcpts, n)
	}
	var last time.Time
	must(conn.QueryRow(ctx, "SELECT time FROM idemgate_receipts WHERE workflow_id = $1", fmt.Sprintf("fill-wf-%010d", n-1)).Scan(&last))
	fillT0(last, n)
}

func checkFill(recs, rcpts, n int) {
	if recs != n || rcpts != n {
		log.Fatalf("fill: %d records and %d receipts stored, want %d of each", recs, rcpts, n)
	}
}

// pgSchema creates a schema and returns a DSN whose search_path is it, and a
// function that drops it.
func pgSchema(ctx context.Context, name string) (string, func()) {
	conn, err := pgx.Connect(ctx, pgDSN())
	must(err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	must(err)
	conn.Close(ctx)
	u, err := url.Parse(pgDSN())
	must(err)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		conn, err := pgx.Connect(ctx, pgDSN())
		must(err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
		must(err)
	}
}

// pgFill inserts n records and n receipts into the schema of dsn, in
// transactions of fillChunk rows per table, then analyzes and checkpoints.
func pgFill(ctx context.Context, dsn string, n int) {
	conn, err := pgx.Connect(ctx, dsn)
	must(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SET synchronous_commit = off")
	must(err)
	base := t0.Add(-24 * time.Hour)
	spacing := 24 * time.Hour / time.Duration(n)
	key := `lpad(to_hex(i * $3::bigint), 8, '0') || '/fill/' || i`
	for lo := 0; lo < n; lo += fillChunk {
		hi := min(lo+fillChunk, n) - 1
		must(pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease,
				result, result_omitted, workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent)
				SELECT `+key+`, 'ChargeCard', 'destructive', '3f2a9c0b7d1e', $4, 'completed', 'fill#' || i,
					$6::timestamptz + i * $7::interval + interval '1 minute', $5, false, 'fill-wf-' || lpad(i::text, 10, '0'), $8, 1, 1,
					$6::timestamptz + i * $7::interval, $6::timestamptz + i * $7::interval, $9, false
				FROM generate_series($1::bigint, $2::bigint) i`,
				lo, hi, fillStep(n), args, result, base, spacing, runID, t0.Add(30*24*time.Hour)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call,
				workflow_id, run_id, attempt, result_ref, error, actor, reason, resolution)
				SELECT $4::timestamptz + i * $5::interval, `+key+`, 'ChargeCard', 'destructive', 'ran', '3f2a9c0b7d1e', NULL,
					'fill-wf-' || lpad(i::text, 10, '0'), $6, 1, 'sha256:9b1f', '', '', '', ''
				FROM generate_series($1::bigint, $2::bigint) i`, lo, hi, fillStep(n), base, spacing, runID)
			return err
		}))
	}
	_, err = conn.Exec(ctx, "ANALYZE idemgate_records; ANALYZE idemgate_receipts")
	must(err)
	_, err = conn.Exec(ctx, "CHECKPOINT")
	must(err)
	var recs, rcpts int
	must(conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM idemgate_records), (SELECT count(*) FROM idemgate_receipts)").Scan(&recs, &rcpts))
	checkFill(recs, rcpts, n)
}

// pruneBench sweeps the filled store's records (all expired by then), then
// prunes every receipt through op (the same database, opened apart, as the CLI
// does) while one worker claims on s, and prints how long the prune took and
// what the claims waited.
func pruneBench(ctx context.Context, name string, n int, s, op store.Store) {
	p, ok := op.(store.Pruner)
	if !ok {
		log.Fatalf("%s: not a store.Pruner", name)
	}
	later := t0.Add(31 * 24 * time.Hour)
	start := time.Now()
	swept, err := s.Sweep(ctx, later, 0)
	must(err)
	sweepTime := time.Since(start)
	var (
		lat  []time.Duration
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			key := spreadKey(fmt.Sprintf("prune/%s/%d", runID, i))
			t := time.Now()
			_, _, err := s.Begin(ctx, claimFor(key))
			must(err)
			lat = append(lat, time.Since(t))
		}
	})
	start = time.Now()
	removed, err := p.Prune(ctx, store.Prune{Before: t0, Now: later, Actor: "storebench", Reason: "measure"})
	must(err)
	pruneTime := time.Since(start)
	close(done)
	wg.Wait()
	if len(lat) == 0 {
		lat = append(lat, 0)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration {
		return lat[min(len(lat)-1, int(f*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	fmt.Printf("\n%s: swept %d records in %s; pruned %d of %d receipts (batches of %d) in %s; %d claims beside it: median %s, p99 %s, max %s\n",
		name, swept, sweepTime.Round(time.Second), removed, n, store.DefaultPruneBatch, pruneTime.Round(time.Second), len(lat), q(0.5), q(0.99), lat[len(lat)-1].Round(time.Millisecond))
}

// queryBench times one page of every operator query on the filled store s (n
// records and receipts; a few claims of fillCompare's on top), each the median of
// five runs, and prints a table.
func queryBench(ctx context.Context, name string, n int, s store.Store) {
	const page = 100
	mid := n / 2
	midKey := fmt.Sprintf("%08x/fill/%d", int64(mid)*fillStep(n), mid)
	midWF := fmt.Sprintf("fill-wf-%010d", mid)
	later := t0.Add(31 * 24 * time.Hour)
	hs, _ := s.(interface {
		Held(context.Context, time.Time, int) ([]store.Record, error)
	})
	type q struct {
		what string
		run  func() (int, error)
	}
	// A receipt query is one page as the operator's listings read it
	// (store.PageReceipts: at most store.DefaultReceiptScan receipts examined);
	// "rows" is what the page returned.
	rec := func(f store.ReceiptFilter) func() (int, error) {
		return func() (int, error) { p, err := store.PageReceipts(ctx, s, f); return len(p.Receipts), err }
	}
	// list is the CLI's listing of up to 100 receipts: pages until 100 match or
	// operate.ListPages pages ended short.
	list := func(f store.ReceiptFilter) func() (int, error) {
		return func() (int, error) { l, err := operate.List(ctx, s, f, page, true); return len(l.Receipts), err }
	}
	qs := []q{
		{"pending (page of 100)", func() (int, error) { rs, err := s.Pending(ctx, t0, page); return len(rs), err }},
		{"receipts --key (one key)", rec(store.ReceiptFilter{Key: midKey, Limit: page})},
		{"receipts --workflow (one workflow)", rec(store.ReceiptFilter{WorkflowID: midWF, Limit: page})},
		{"receipts --since (the last hour, first page)", rec(store.ReceiptFilter{Since: t0.Add(-time.Hour), Limit: page})},
		{"receipts --since (the whole day, first page)", rec(store.ReceiptFilter{Since: t0.Add(-24 * time.Hour), Limit: page})},
		{"receipts --activity (every receipt matches, first page)", rec(store.ReceiptFilter{Activity: "ChargeCard", Limit: page})},
		{"receipts --decision resolved (none match: the whole table)", rec(store.ReceiptFilter{Decision: store.DecisionResolved, Limit: page})},
		{"receipts --activity NoSuch (none match: one bounded page)", rec(store.ReceiptFilter{Activity: "NoSuch", Limit: page})},
		{"receipts --activity NoSuch --since 1h (none match: one bounded page)", rec(store.ReceiptFilter{Activity: "NoSuch", Since: t0.Add(-time.Hour), Limit: page})},
		{"CLI listing --activity NoSuch (operate.List: 10 bounded pages, then \"more may follow\")", list(store.ReceiptFilter{Activity: "NoSuch"})},
		{"CLI listing --since 1h --activity NoSuch (10 bounded pages)", list(store.ReceiptFilter{Activity: "NoSuch", Since: t0.Add(-time.Hour)})},
		{"pause note for an unknown activity (operate.UnnamedActivityNote)", func() (int, error) {
			note, err := operate.UnnamedActivityNote(ctx, s, "NoSuch", t0)
			return len(note), err
		}},
		{"before, for comparison: Receipts --activity NoSuch (one unbounded query)", func() (int, error) {
			rs, err := s.Receipts(ctx, store.ReceiptFilter{Activity: "NoSuch", Limit: page})
			return len(rs), err
		}},
		{"before, for comparison: Receipts --since (the last hour, one query by ID)", func() (int, error) {
			rs, err := s.Receipts(ctx, store.ReceiptFilter{Since: t0.Add(-time.Hour), Limit: page})
			return len(rs), err
		}},
		{"receipts, every one (first page)", rec(store.ReceiptFilter{Limit: page})},
		{"export page (until a cut-off, after the middle ID, 1000)", func() (int, error) {
			mids, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: midWF, Limit: 1})
			if err != nil || len(mids) == 0 {
				return 0, err
			}
			p, err := store.PageReceipts(ctx, s, store.ReceiptFilter{Until: t0, AfterID: mids[0].ID, Limit: 1000})
			return len(p.Receipts), err
		}},
		{"export's last page (until a cut-off at the middle, after it: none match)", func() (int, error) {
			mids, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: midWF, Limit: 1})
			if err != nil || len(mids) == 0 {
				return 0, err
			}
			p, err := store.PageReceipts(ctx, s, store.ReceiptFilter{Until: mids[0].Time, AfterID: mids[0].ID, Limit: 1000})
			return len(p.Receipts), err
		}},
		{"receipt horizon (export's start)", func() (int, error) {
			_, err := s.(store.ReceiptHorizoner).ReceiptHorizon(ctx)
			return 1, err
		}},
		{"sweep (nothing expired: one batch finds none)", func() (int, error) { return s.Sweep(ctx, t0, 1000) }},
	}
	if hs != nil {
		qs = append(qs, q{"held (page of 100, none held)", func() (int, error) { rs, err := hs.Held(ctx, later, page); return len(rs), err }})
	}
	fmt.Printf("\n%s: one page of each operator query on %d records and %d receipts (median of 5)\n\n", name, n, n)
	fmt.Println("| query | rows | ms |")
	fmt.Println("|---|---:|---:|")
	for _, x := range qs {
		var ds []time.Duration
		rows := 0
		for range 5 {
			start := time.Now()
			r, err := x.run()
			must(err)
			ds = append(ds, time.Since(start))
			rows = r
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		fmt.Printf("| %s | %d | %.1f |\n", x.what, rows, float64(ds[2].Microseconds())/1000)
	}
}
