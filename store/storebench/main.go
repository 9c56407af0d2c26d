// Command storebench measures the durable stores against bare writes of the same
// size on the same database, in one run, and prints a markdown table:
//
//	go run ./store/storebench -backend sqlite
//	scripts/with-postgres.sh go run ./store/storebench -backend postgres
//
// "claim" is store.Begin on a new key against a bare single-row INSERT (one
// commit each); "claim+complete" is Begin then Complete against a bare INSERT then
// UPDATE (two commits each). Store and bare alternate in short rounds, each
// going first in turn, so that drift and noisy neighbours hit both; the table gives
// the ratio over all rounds and the median of the per-round ratios. -memcheck N claims and completes N keys and prints the
// heap in use every 100,000 steps instead; -cpu N prints the CPU time per step of
// the PostgreSQL server and of this process; -wal N prints the WAL each step writes
// (SQLite pages, PostgreSQL bytes), store and bare, instead of timing. -cpuprofile FILE writes a CPU profile of
// the run (go tool pprof FILE); PostgreSQL's own CPU is in the server, not here.
// -fill N loads N records and N receipts into a store and compares a claim on it
// with a claim on an empty store instead:
//
//	go run ./store/storebench -backend sqlite -fill 10000000
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/sqlite"
)

var (
	backend  = flag.String("backend", "sqlite", "sqlite, postgres or all")
	dur      = flag.Duration("d", 6*time.Second, "time per measurement (split into rounds)")
	rounds   = flag.Int("rounds", 12, "alternating store/bare rounds per measurement")
	workers  = flag.String("workers", "1,8,32", "PostgreSQL worker counts")
	durab    = flag.String("durability", "claim", "store durability: claim (only the claim synced) or strict (every step synced)")
	sworkers = flag.String("sqlite-workers", "1", "SQLite worker counts (goroutines sharing one store; the bare side shares one connection, one sync per insert)")
	pgConns  = flag.Int("pg-conns", 0, "PostgreSQL store pool size (0: as many connections as workers; the bare side always has as many as workers)")
	path     = flag.String("path", "", "SQLite file (default: a new file in a temporary directory); with -fill, the filled store, kept, and reused by a later run with the same -path")
	memcheck = flag.Int("memcheck", 0, "claim+complete this many keys on -backend and print heap in use every 100k")
	cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of this process (store and bare rounds alike) to this file")
	cpuSteps = flag.Int("cpu", 0, "instead of timing, print the CPU time per step (PostgreSQL server processes, read from /proc, so the server must run on this machine; and this process), store and bare, over this many steps of each kind with 8 workers")
	fill     = flag.Int("fill", 0, "instead of comparing with bare writes, load this many records and receipts into one store (batched INSERT … SELECT, not through Begin) and compare a claim on it with a claim on an empty store")
	queries  = flag.Bool("queries", false, "with -fill: then time one page of every operator query (pending, receipts by key, workflow, since, activity, decision, an export page, a sweep batch, held) on the filled store")
	prune    = flag.Bool("prune", false, "with -fill: then sweep the records and prune every receipt while one worker claims, and print the prune's time and the claims' latency")
	pgKeep   = flag.String("pg-schema", "", "with -fill on PostgreSQL: fill into this schema and keep it; a later run with the same schema reuses the fill")
	walSteps = flag.Int("wal", 0, "instead of timing, print the WAL written per step (SQLite pages, PostgreSQL bytes), store and bare, averaged over this many steps of one worker (at most 100 on SQLite, so that no automatic checkpoint runs in between)")
)

var (
	args   = []byte(`{"amount":4200,"currency":"eur","customer":"cus_4217","description":"order 4217"}`)
	result = []byte(`{"id":"ch_3Nf1x2","status":"succeeded","amount":4200,"currency":"eur","paid":true}`)
	t0     = time.Now().UTC()
	runID  = strconv.FormatInt(time.Now().UnixNano(), 36)
)

func claimFor(key string) store.Claim {
	return store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "3f2a9c0b7d1e",
		Args: args, Owner: key + "#1", Lease: t0.Add(time.Minute), Window: 24 * time.Hour,
		WorkflowID: "bench-wf", RunID: runID, Attempt: 1, Now: t0}
}

func completeFor(key string) store.Transition {
	return store.Transition{Key: key, Owner: key + "#1", Now: t0, Result: result, Window: 24 * time.Hour,
		Receipt: store.Receipt{Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRan,
			ArgsHash: "3f2a9c0b7d1e", WorkflowID: "bench-wf", RunID: runID, Attempt: 1, ResultRef: "sha256:9b1f"}}
}

// bare is the like-for-like baseline: one row of the same size, no receipt.
type bare struct {
	insert func(ctx context.Context, key string) error
	update func(ctx context.Context, key string) error
	// walMark returns how much WAL the database has written so far: SQLite WAL
	// frames (pages) since the last checkpoint, PostgreSQL bytes.
	walMark func(ctx context.Context) int64
	// walReset starts a new count (SQLite: checkpoint and truncate the WAL).
	walReset func(ctx context.Context)
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("storebench: ") // errors go out as every command's do: the program's name, once
	flag.Parse()
	ctx := context.Background()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Fatal(err)
			}
		}()
	}
	if *fill > 0 {
		fillBench(ctx, *fill)
		return
	}
	if *memcheck > 0 {
		s, closeFn := openStore(ctx, *backend, 8)
		defer closeFn()
		memCheck(ctx, s, *memcheck)
		return
	}
	if *cpuSteps > 0 {
		const conc = 8
		fmt.Printf("CPU time per step, %d steps of each kind, %d workers (server: every postgres process on this machine)\n\n", *cpuSteps, conc)
		fmt.Println("| backend | step | store server µs | bare server µs | store client µs | bare client µs | store/bare (server+client) |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|")
		s, closeFn := openStore(ctx, "postgres", conc)
		b, closeBare := pgBare(ctx, conc)
		for _, st := range steps(s, b) {
			var sv, sc, bv, bc float64
			for i := range 3 { // alternate, sum three rounds each
				tag := fmt.Sprintf("cpu/%s/%d", st.step, i)
				v, c := cpuPerStep(ctx, conc, *cpuSteps/3, tag+"/store", st.store)
				sv, sc = sv+v/3, sc+c/3
				v, c = cpuPerStep(ctx, conc, *cpuSteps/3, tag+"/bare", st.bare)
				bv, bc = bv+v/3, bc+c/3
			}
			fmt.Printf("| PostgreSQL | %s | %.0f | %.0f | %.0f | %.0f | %.2fx |\n", st.step, sv, bv, sc, bc, (sv+sc)/(bv+bc))
		}
		closeBare()
		closeFn()
		return
	}
	if *walSteps > 0 {
		fmt.Printf("WAL written per step, averaged over %d steps of one worker\n\n", *walSteps)
		fmt.Println("| backend | step | store | bare | store/bare |")
		fmt.Println("|---|---|---:|---:|---:|")
		if *backend == "sqlite" || *backend == "all" {
			s, closeFn := openStore(ctx, "sqlite", 1)
			walCount(ctx, "SQLite", "pages", min(*walSteps, 100), s, sqliteBare(ctx, *path))
			closeFn()
		}
		if *backend == "postgres" || *backend == "all" {
			s, closeFn := openStore(ctx, "postgres", 1)
			b, closeBare := pgBare(ctx, 1)
			walCount(ctx, "PostgreSQL", "bytes", *walSteps, s, b)
			closeBare()
			closeFn()
		}
		return
	}
	fmt.Printf("go %s, %s/%s, %d CPUs, %v per measurement in %d rounds, durability %s\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *dur, *rounds, *durab)
	fmt.Println("| backend | workers | step | store ops/s | bare ops/s | store µs/op | bare µs/op | store/bare (all) | store/bare (median round) |")
	fmt.Println("|---|---:|---|---:|---:|---:|---:|---:|---:|")
	if *backend == "sqlite" || *backend == "all" {
		for _, n := range counts(*sworkers) {
			s, closeFn := openStore(ctx, "sqlite", 1)
			b := sqliteBare(ctx, *path)
			compare(ctx, "SQLite", n, s, b)
			closeFn()
		}
	}
	if *backend == "postgres" || *backend == "all" {
		for _, n := range counts(*workers) {
			s, closeFn := openStore(ctx, "postgres", n)
			b, closeBare := pgBare(ctx, n)
			compare(ctx, "PostgreSQL", n, s, b)
			closeBare()
			closeFn()
		}
	}
}

func openStore(ctx context.Context, which string, conns int) (store.Store, func()) {
	d, err := store.ParseDurability(*durab)
	if err != nil {
		log.Fatal(err)
	}
	switch which {
	case "sqlite":
		if *path == "" {
			dir, err := os.MkdirTemp("", "storebench")
			if err != nil {
				log.Fatal(err)
			}
			*path = filepath.Join(dir, "bench.db")
		}
		s, err := sqlite.OpenWith(ctx, *path, sqlite.Options{Durability: d})
		if err != nil {
			log.Fatal(err)
		}
		return s, func() { s.Close() }
	case "postgres":
		if *pgConns > 0 {
			conns = *pgConns
		}
		s, err := postgres.OpenWith(ctx, pgDSN(), postgres.Options{MaxConns: int32(conns), Durability: d})
		if err != nil {
			log.Fatal(err)
		}
		return s, func() { s.Close() }
	}
	log.Fatalf("-backend %q: want sqlite or postgres", which)
	return nil, nil
}

// counts parses a comma-separated list of worker counts.
func counts(list string) []int {
	var out []int
	for _, w := range strings.Split(list, ",") {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			log.Fatalf("worker counts %q: want positive integers separated by commas", list)
		}
		out = append(out, n)
	}
	return out
}

func pgDSN() string {
	d := os.Getenv("IDEMGATE_POSTGRES_DSN")
	if d == "" {
		log.Fatal("IDEMGATE_POSTGRES_DSN is not set: run under scripts/with-postgres.sh")
	}
	return d
}

func sqliteBare(ctx context.Context, p string) bare {
	db, err := sql.Open("sqlite", p+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_bare (key TEXT PRIMARY KEY, state TEXT NOT NULL,
		owner TEXT NOT NULL, args BLOB, result BLOB, updated_at INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	return bare{
		insert: func(ctx context.Context, key string) error {
			_, err := db.ExecContext(ctx, `INSERT INTO bench_bare VALUES (?, 'claimed', ?, ?, NULL, ?)`, key, key+"#1", args, t0.UnixMicro())
			return err
		},
		update: func(ctx context.Context, key string) error {
			_, err := db.ExecContext(ctx, `UPDATE bench_bare SET state = 'completed', result = ?, updated_at = ? WHERE key = ?`, result, t0.UnixMicro(), key)
			return err
		},
		walMark: func(ctx context.Context) int64 {
			var pageSize int64
			if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
				log.Fatal(err)
			}
			fi, err := os.Stat(p + "-wal")
			if err != nil {
				log.Fatal(err)
			}
			return (fi.Size() - 32) / (pageSize + 24) // WAL header, then frames of a 24-byte header and a page
		},
		walReset: func(ctx context.Context) {
			var busy, frames, done int
			if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil || busy != 0 {
				log.Fatalf("checkpoint: busy %d, %v", busy, err)
			}
		},
	}
}

func pgBare(ctx context.Context, conns int) (bare, func()) {
	cfg, err := pgxpool.ParseConfig(pgDSN())
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_bare (key text PRIMARY KEY, state text NOT NULL,
		owner text NOT NULL, args bytea, result bytea, updated_at timestamptz NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	return bare{
		insert: func(ctx context.Context, key string) error {
			_, err := pool.Exec(ctx, `INSERT INTO bench_bare VALUES ($1, 'claimed', $2, $3, NULL, $4)`, key, key+"#1", args, t0)
			return err
		},
		update: func(ctx context.Context, key string) error {
			_, err := pool.Exec(ctx, `UPDATE bench_bare SET state = 'completed', result = $1, updated_at = $2 WHERE key = $3`, result, t0, key)
			return err
		},
		walMark: func(ctx context.Context) int64 {
			var n int64
			if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn() - '0/0'").Scan(&n); err != nil {
				log.Fatal(err)
			}
			return n
		},
		walReset: func(context.Context) {},
	}, pool.Close
}

func compare(ctx context.Context, name string, workers int, s store.Store, b bare) {
	for _, st := range steps(s, b) {
		tag := fmt.Sprintf("%s-%d/%s", name, workers, st.step) // keys unique per configuration
		// Warm up both (statement caches, pool connections).
		run(ctx, workers, 200*time.Millisecond, tag+"/warm-store", st.store)
		run(ctx, workers, 200*time.Millisecond, tag+"/warm-bare", st.bare)
		var sn, bn int64
		var sd, bd time.Duration
		var ratios []float64
		per := *dur / time.Duration(*rounds)
		for r := range *rounds {
			// Alternate which goes first, so drift and neighbours hit both alike.
			var n1, n2 int64
			var d1, d2 time.Duration
			if r%2 == 0 {
				n1, d1 = run(ctx, workers, per, fmt.Sprintf("%s/store/%d", tag, r), st.store)
				n2, d2 = run(ctx, workers, per, fmt.Sprintf("%s/bare/%d", tag, r), st.bare)
			} else {
				n2, d2 = run(ctx, workers, per, fmt.Sprintf("%s/bare/%d", tag, r), st.bare)
				n1, d1 = run(ctx, workers, per, fmt.Sprintf("%s/store/%d", tag, r), st.store)
			}
			sn, sd, bn, bd = sn+n1, sd+d1, bn+n2, bd+d2
			ratios = append(ratios, (float64(n2)/d2.Seconds())/(float64(n1)/d1.Seconds()))
		}
		sort.Float64s(ratios)
		sops, bops := float64(sn)/sd.Seconds(), float64(bn)/bd.Seconds()
		fmt.Printf("| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.2fx | %.2fx |\n", name, workers, st.step, sops, bops,
			float64(workers)*1e6/sops, float64(workers)*1e6/bops, bops/sops, ratios[len(ratios)/2])
	}
}

// walCount prints the WAL one claim and one complete write, store and bare, on
// keys of their own, after a warm-up so that pages first touched since the last
// checkpoint (whole-page images on PostgreSQL) weigh as in a long run.
func walCount(ctx context.Context, name, unit string, n int, s store.Store, b bare) {
	tag := fmt.Sprintf("%s-wal", name)
	claimStore := func(ctx context.Context, key string) error {
		o, _, err := s.Begin(ctx, claimFor(key))
		if err == nil && o != store.OutcomeClaimed {
			err = fmt.Errorf("Begin(%s) = %s", key, o)
		}
		return err
	}
	completeStore := func(ctx context.Context, key string) error { return s.Complete(ctx, completeFor(key)) }
	measure := func(who string, claim, complete func(context.Context, string) error) (perClaim, perComplete float64) {
		key := func(i int) string { return fmt.Sprintf("bench/%s/%s/%s/%d", runID, tag, who, i) }
		for i := range n { // warm-up: claim and complete n keys
			must(claim(ctx, key(-1-i)))
			must(complete(ctx, key(-1-i)))
		}
		b.walReset(ctx)
		m := b.walMark(ctx)
		for i := range n {
			must(claim(ctx, key(i)))
		}
		m1 := b.walMark(ctx)
		b.walReset(ctx)
		m2 := b.walMark(ctx)
		for i := range n {
			must(complete(ctx, key(i)))
		}
		m3 := b.walMark(ctx)
		return float64(m1-m) / float64(n), float64(m3-m2) / float64(n)
	}
	sc, sp := measure("store", claimStore, completeStore)
	bc, bp := measure("bare", b.insert, b.update)
	fmt.Printf("| %s | claim | %.1f %s | %.1f %s | %.2fx |\n", name, sc, unit, bc, unit, sc/bc)
	fmt.Printf("| %s | complete | %.1f %s | %.1f %s | %.2fx |\n", name, sp, unit, bp, unit, sp/bp)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

type step struct {
	step        string
	store, bare func(ctx context.Context, key string) error
}

// steps are the measured pairs: a claim against a bare insert, claim+complete
// against a bare insert then update.
func steps(s store.Store, b bare) []step {
	return []step{
		{"claim", func(ctx context.Context, key string) error {
			o, _, err := s.Begin(ctx, claimFor(key))
			if err == nil && o != store.OutcomeClaimed {
				err = fmt.Errorf("Begin(%s) = %s", key, o)
			}
			return err
		}, b.insert},
		{"claim+complete", func(ctx context.Context, key string) error {
			if _, _, err := s.Begin(ctx, claimFor(key)); err != nil {
				return err
			}
			return s.Complete(ctx, completeFor(key))
		}, func(ctx context.Context, key string) error {
			if err := b.insert(ctx, key); err != nil {
				return err
			}
			return b.update(ctx, key)
		}},
	}
}

// cpuPerStep runs n steps of op from workers goroutines on new keys and returns
// the CPU time per step of the PostgreSQL server processes and of this process, in µs.
func cpuPerStep(ctx context.Context, workers, n int, tag string, op func(context.Context, string) error) (server, client float64) {
	var next atomic.Int64
	s0, c0 := serverCPU(), selfCPU()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				must(op(ctx, fmt.Sprintf("bench/%s/%s/%d", runID, tag, i)))
			}
		})
	}
	wg.Wait()
	s1, c1 := serverCPU(), selfCPU()
	return float64(s1-s0) / float64(n), float64(c1-c0) / float64(n)
}

// serverCPU sums the user and system time of the PostgreSQL server this run
// uses (its postmaster, read from $IDEMGATE_PGDATA/postmaster.pid, and the
// postmaster's children), in µs. Other servers on the machine do not count.
func serverCPU() int64 {
	pm := postmasterPID()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		st := string(b)
		j := strings.LastIndexByte(st, ')')
		if j < 0 || j+2 > len(st) {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(st[:strings.IndexByte(st, '(')]))
		f := strings.Fields(st[j+2:]) // from field 3, state
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != pm && ppid != pm {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
		k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
		total += (u + k) * 1e6 / clockTicks
	}
	return total
}

func postmasterPID() int {
	dir := os.Getenv("IDEMGATE_PGDATA")
	if dir == "" {
		log.Fatal("-cpu: IDEMGATE_PGDATA is not set: run under scripts/with-postgres.sh, on the server's machine")
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		log.Fatalf("-cpu: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		log.Fatalf("-cpu: postmaster.pid: %v", err)
	}
	return pid
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on Linux.
const clockTicks = 100

func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return (ru.Utime.Nano() + ru.Stime.Nano()) / 1000
}

// run calls op on new keys from workers goroutines for d and returns the count
// and the time taken.
func run(ctx context.Context, workers int, d time.Duration, tag string, op func(context.Context, string) error) (int64, time.Duration) {
	var (
		n    atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
	)
	start := time.Now()
	stop := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				if err := op(ctx, fmt.Sprintf("bench/%s/%s/%d/%d", runID, tag, w, i)); err != nil {
					once.Do(func() { log.Fatalf("%s: %v", tag, err) })
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start)
}

func memCheck(ctx context.Context, s store.Store, total int) {
	const conc = 8
	fmt.Printf("%s: claim+complete %d keys with %d goroutines; heap in use after a GC every 100,000\n\n", *backend, total, conc)
	fmt.Println("| steps | HeapInuse MiB | HeapObjects | Sys MiB | elapsed |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	var next atomic.Int64
	start := time.Now()
	var mu sync.Mutex
	report := func(done int64) {
		mu.Lock()
		defer mu.Unlock()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("| %d | %.1f | %d | %.1f | %s |\n", done, float64(m.HeapInuse)/(1<<20), m.HeapObjects, float64(m.Sys)/(1<<20), time.Since(start).Round(time.Second))
	}
	report(0)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(total) {
					return
				}
				key := fmt.Sprintf("mem/%s/%d", runID, i)
				if _, _, err := s.Begin(ctx, claimFor(key)); err != nil {
					log.Fatal(err)
				}
				if err := s.Complete(ctx, completeFor(key)); err != nil {
					log.Fatal(err)
				}
				if i%100000 == 0 {
					report(i)
				}
			}
		})
	}
	wg.Wait()
}
