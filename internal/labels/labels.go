// Package labels names the container labels stem sets and reads. They are
// how any consumer confirms that a container really is the instance a
// registry record or socket directory claims.
package labels

import "strconv"

const (
	prefix     = "io.stem."
	Instance   = prefix + "instance"
	Profile    = prefix + "profile"
	Series     = prefix + "series"
	Card       = prefix + "card"
	Task       = prefix + "task"
	Target     = prefix + "target"
	Schema     = prefix + "schema"
	ConfigHash = prefix + "config-hash"
	Workspace  = prefix + "workspace"
	Managed    = prefix + "managed" // "true" on every stem container
)

// SchemaVersion is bumped whenever the container layout changes in a way
// that needs re-creation (mounts, entrypoint contract, labels).
const SchemaVersion = "1"

// SchemaNumber is SchemaVersion as the registry records it.
func SchemaNumber() int {
	n, err := strconv.Atoi(SchemaVersion)
	if err != nil {
		panic("labels: SchemaVersion is not a number: " + SchemaVersion)
	}
	return n
}
