// Command soak runs idemgate's chaos soak: gated worker processes under a seeded
// nemesis, an agent-loop workload, and a checker over the vendors' ledgers, the
// store's receipts and Temporal's results. See docs/soak.md.
package main

func main() {}
