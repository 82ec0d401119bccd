// Package provenance records every change an agent makes to a file of a
// card through stem (a direct nvim_buffer_edit, an accepted proposal) and
// answers, line by line, who wrote a file: the student, or which agent or
// teacher (`stemctl audit blame`).
//
// A record holds who (account, agent id or teacher grant, level, MCP
// session), when, which tool, and content hashes: one hash per line of the
// whole buffer before the change, and the change as hunks of new line
// hashes. Nothing of the text itself is kept. Blame works on content, not
// on editor state: it walks the records newest first, diffing the file as
// it is now against each record's "after", the way git blame walks
// commits, so it holds across saves, the student's later edits, Neovim
// restarts and re-created containers. A line the diffs trace back to a
// record's new lines is that agent's (an accepted proposal's, with the
// host input that accepted it); a line that appears between two records,
// or was there before the first, was written in the container ("not
// written by a recorded change": the starter code, the student's typing,
// their programs, and whatever else no record covers, see
// docs/security.md).
//
// The records live on the host, in the account's state directory next to
// the audit log, one file per card file (never in the card or the socket
// directory, which the container writes). Each file is a hash chain like
// the audit log's, appended under a lock with an fsync, with a head file
// beside it: a record edited, removed or reordered, or cut off the end, is
// reported by blame. As with the audit log this is evidence against
// accidents and casual edits, not against the account's owner.
package provenance
