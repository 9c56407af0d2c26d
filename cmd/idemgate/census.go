package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/mcptools"
)

// censusJSON is the census as --json prints it.
type censusJSON struct {
	Read            int          `json:"read"`
	IdempotentWrite int          `json:"idempotent_write"`
	Destructive     int          `json:"destructive"`
	Review          []string     `json:"review"`
	Contradicts     []string     `json:"contradicts"`
	Activities      []censusItem `json:"activities"`
}

type censusItem = operate.CensusItem

func (c *cli) census(args []string) error {
	f := c.newFlags("census", "[--strict] NAME... | --mcp URL | --mcp-command CMD", "Classifies activity names as the gate does (no Options.Effects overrides), prints the word\n"+
		"that decided and why, and flags the names whose grammar cannot tell (no known verb, a verb out of\n"+
		"place, a verb that reads or writes): they count as destructive, or the more severe reading, until a\n"+
		"person confirms them. With --mcp or --mcp-command it lists an MCP server's tools and classifies each\n"+
		"as the bridge registers it (mcp.SERVER.TOOL), its annotations beside the name's class: they may\n"+
		"tighten the class, give a class to a name with no known verb, and lower a flagged name only down to\n"+
		"the most severe verb in it (actions_get + readOnlyHint reads; orders_cancel stays destructive).", false)
	strict := f.Bool("strict", false, "exit 1 when any name is flagged for review, or (MCP) a tool's annotations contradict its name")
	mcpURL := f.String("mcp", "", "an MCP server's streamable HTTP URL")
	mcpCmd := f.String("mcp-command", "", "an MCP server's command (run over stdio; split at spaces)")
	mcpName := f.String("mcp-name", "server", "the server's name in activity names")
	names, err := f.parse(args)
	if err != nil {
		return err
	}
	var rep interceptor.CensusReport
	if *mcpURL != "" || *mcpCmd != "" {
		if len(names) > 0 || *mcpURL != "" && *mcpCmd != "" {
			return usagef("give either names, --mcp URL or --mcp-command CMD")
		}
		var tr mcp.Transport
		if *mcpURL != "" {
			tr = &mcp.StreamableClientTransport{Endpoint: *mcpURL, MaxRetries: -1}
		} else if tr, err = mcptools.Transport(*mcpCmd); err != nil {
			return usagef("--mcp-command: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := mcptools.Dial(ctx, *mcpName, tr, mcptools.Options{})
		if err != nil {
			return secrets.ScrubError(err, *mcpURL) // the URL may carry credentials
		}
		defer b.Session().Close()
		rep, names = b.Census(interceptor.Options{}), b.Names()
	} else {
		if len(names) == 0 {
			return usagef("give the activity names to classify, e.g. `idemgate census ChargeCard GetBalance`, or an MCP server with --mcp URL")
		}
		rep = interceptor.Census(names)
	}
	items := operate.CensusItems(rep, names)
	if f.json {
		if err := c.printJSON(censusJSON{Read: rep.Read, IdempotentWrite: rep.IdempotentWrite, Destructive: rep.Destructive,
			Review: append([]string{}, rep.Review...), Contradicts: append([]string{}, rep.Contradicts...), Activities: items}); err != nil {
			return err
		}
	} else {
		tw := c.table()
		row(tw, "ACTIVITY", "EFFECT", "WORD", "HINTS", "REVIEW", "REASON")
		for _, it := range items {
			review := ""
			if it.Review {
				review = "needs review"
			}
			hints := dash(it.Hints)
			if it.Contradicts {
				hints += " (contradicts the name)"
			}
			row(tw, it.Name, it.Effect, dash(it.Word), hints, review, it.Reason)
		}
		tw.Flush()
		c.printf("%s\n", rep.String())
	}
	if *strict && (len(rep.Review) > 0 || len(rep.Contradicts) > 0) {
		var why []string
		for _, n := range rep.Review {
			why = append(why, "  "+n+": "+rep.Effects[n].Reason())
		}
		for _, n := range rep.Contradicts {
			cl := rep.Effects[n]
			why = append(why, fmt.Sprintf("  %s: the name reads %s, its annotations say %s", n, cl.Effect, cl.Hinted))
		}
		var what []string
		if len(rep.Review) > 0 {
			what = append(what, fmt.Sprintf("%d name(s) need review: %s", len(rep.Review), strings.Join(rep.Review, ", ")))
		}
		if len(rep.Contradicts) > 0 {
			what = append(what, fmt.Sprintf("%d tool(s) have annotations that contradict their name: %s",
				len(rep.Contradicts), strings.Join(rep.Contradicts, ", ")))
		}
		return fmt.Errorf("--strict: %s. Rename them so the verb comes first, fix the annotations, or classify them "+
			"in the workers' Options.Effects:\n%s", strings.Join(what, "; "), strings.Join(why, "\n"))
	}
	return nil
}
