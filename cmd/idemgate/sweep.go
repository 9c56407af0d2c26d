package main

import (
	"fmt"
)

func (c *cli) sweep(args []string) error {
	f := c.newFlags("sweep", "[flags]", "Removes the records past their window once (receipts are kept) and reports how many.", true)
	limit := f.Int("limit", 0, "remove at most N (0: all that expired)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	now := c.now()
	n, err := st.Sweep(ctx, now, *limit)
	if err != nil {
		return fmt.Errorf("sweep (removed %d before the error): %w", n, err)
	}
	if f.json {
		return c.printJSON(map[string]any{"removed": n, "now": now.UTC(), "limit": *limit})
	}
	fmt.Fprintf(c.stdout, "removed %d expired record(s) (expired at or before %s); their receipts are kept\n", n, ts(now))
	return nil
}
