package interceptor_test

import (
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store/memory"
)

// Wire the gate into a worker as a plugin: the worker logs the census of what is
// registered, checks the store before it polls, and closes the store when it stops.
func ExampleNewPlugin() {
	gate, err := interceptor.NewPlugin(
		interceptor.Options{Store: memory.New()}, // sqlite.Open or postgres.Open in production
		interceptor.PluginOptions{
			StoreName:  "postgres://app:s3cret@db.internal/idemgate", // shown as app:xxxxx@…
			Strict:     true,                                         // no activity left unclassified
			CloseStore: true,
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(gate.Name())
	// The same value goes to the client and to every worker made from it.
	run := func(c client.Client) error { // c from client.Dial(client.Options{Plugins: []client.Plugin{gate}})
		w := worker.New(c, "agent", worker.Options{Plugins: []worker.Plugin{gate}})
		return w.Run(worker.InterruptCh()) // fails to start while the store does not answer
	}
	_ = run
	// Output: idemgate
}
