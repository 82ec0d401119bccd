package gdbmi

import (
	"encoding/json"
	"testing"
)

func TestPlain(t *testing.T) {
	r, err := Parse(`^done,bkpt={number="1",type="breakpoint",locations=[{number="1.1",line="8"},{number="1.2",line="9"}]},x="a",x="b",frames=[frame={level="0"},frame={level="1"}]`)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(FieldsPlain(r.Results))
	want := `{"bkpt":{"locations":[{"line":"8","number":"1.1"},{"line":"9","number":"1.2"}],"number":"1","type":"breakpoint"},"frames":[{"frame":{"level":"0"}},{"frame":{"level":"1"}}],"x":"a","x#2":"b"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
