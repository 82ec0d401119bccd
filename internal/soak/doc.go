// Package soak holds the long-run benchmark of stem's processes (its test
// files): many MCP clients on one instance, an agent calling through its
// relay and a class server over 30 sessions, for as long as
// STEM_SOAK_DURATION says, the memory and descriptors of each process
// compared from start to end.
package soak
