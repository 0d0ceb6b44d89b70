// Package mcpproxy is the MCP proxy MST puts between a client and each of
// its servers, on the machine that runs the trial.
//
// For every trial the worker opens a Set: one fresh connection to each of
// the variant's servers (stdio or streamable HTTP, through package servers)
// and a proxy in front of each, which the client reaches by one of its
// faces:
//
//   - over streamable HTTP on the loopback (Set.Servers), an MCP server of
//     MST's own (the official Go SDK) at a path and with a bearer token no
//     one else knows, for a client in a process of its own (a CLI);
//   - over stdio (Set.StdioServers), mst mcp-stdio relaying to that
//     endpoint, for a client that can only start programs;
//   - in this process (Set.Conns), servers.Conn values whose calls go to
//     the proxy as function calls, with no MCP encoding, for a client that
//     runs inside the worker (the api client).
//
// The client is handed these in place of the servers (client.Trial.Servers
// or Trial.Conns); the servers' secrets stay with the proxy. Every face
// meets the same handling of a call, below, and the same record.
//
// Each proxy, as the variant asks:
//
//   - offers the variant's view of the tools: new names, titles,
//     descriptions and parameter descriptions, hidden tools left out. A
//     call of a renamed tool reaches the server under its own name.
//   - records what the server offered (its own list and hash) and every
//     tools/call with its arguments, result, error and timing, whatever the
//     client later says: the trial's Evidence. Merge folds it into the
//     transcript beside the client's account and notes where they disagree.
//   - answers calls of write tools itself in a dry run (Server.DryRun), with
//     the configured or a generated result, marked simulated.
//   - injects the variant's faults (Server.Faults): latency, error results,
//     protocol errors, a server that goes away; each marked injected. Which
//     calls a fault hits is a function of the trial and the call's number,
//     so a rerun of the same trial sees the same faults.
//
// The proxy forwards tools only: a server's resources and prompts are not
// offered through it.
package mcpproxy
