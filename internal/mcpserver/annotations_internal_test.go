package mcpserver

import "testing"

// TestReadOnlyMeansNotAudited ties a tool's readOnlyHint to its effect flag:
// a tool that tells clients it only reads must not change the session (and
// so is not audited as effectful), and every tool that may change it is
// audited on each call.
func TestReadOnlyMeansNotAudited(t *testing.T) {
	for _, d := range allTools() {
		ro := d.tool.Annotations.ReadOnlyHint
		if ro == nil || d.tool.Annotations.DestructiveHint == nil {
			t.Errorf("%s has no readOnlyHint or destructiveHint", d.tool.Name)
			continue
		}
		if *ro == d.effect {
			t.Errorf("%s: readOnlyHint=%v but effect=%v (audited as effectful iff not read-only)", d.tool.Name, *ro, d.effect)
		}
	}
}
