// Package yamljson turns the scalar values a YAML decoder produces into the
// values encoding/json produces for the same data, so a config or dataset
// reads the same in YAML and in JSON: numbers become json.Number, and the
// numbers JSON cannot hold (infinities, NaN) become strings, which fail
// every numeric check with a readable message.
package yamljson

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Scalar converts one scalar. Other values (maps, lists) are not scalars
// and come back as fmt.Sprint would print them.
func Scalar(v any) any {
	switch v := v.(type) {
	case string, bool, nil:
		return v
	case uint64:
		return json.Number(strconv.FormatUint(v, 10))
	case int64:
		return json.Number(strconv.FormatInt(v, 10))
	case int:
		return json.Number(strconv.Itoa(v))
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return fmt.Sprint(v)
}
