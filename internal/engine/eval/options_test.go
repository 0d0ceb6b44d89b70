package eval

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckOptions(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
		"timeout":{"type":"string"},"maxActions":{"type":"integer","minimum":1}}}`)
	tests := []struct {
		options string
		want    []string
	}{
		{`{"timeout":"5s"}`, nil},
		{`{"timeot":"5s"}`, []string{"timeot: unknown option (did you mean timeout?)"}},
		{`{"maxActions":0}`, []string{"maxActions: must be at least 1, got number 0"}},
	}
	for _, tt := range tests {
		got, err := CheckOptions(schema, json.RawMessage(tt.options))
		if err != nil {
			t.Fatalf("CheckOptions(%s) error = %v", tt.options, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("CheckOptions(%s) mismatch (-want +got):\n%s", tt.options, diff)
		}
	}
}
