package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mst-eval/mst/internal/builtin/provider/wire"
	"github.com/mst-eval/mst/internal/provider"
)

// streamError is a failure reported inside a successful HTTP response: an
// error event, a failed response, or an error object in a stream.
type streamError struct {
	Code    string
	Message string
}

func (e *streamError) Error() string {
	return fmt.Sprintf("openai: error in the response stream: %s: %s", e.Code, e.Message)
}

// status guesses the HTTP status that stands for a stream error's code.
func (e *streamError) status() int {
	c := strings.ToLower(e.Code)
	switch {
	case strings.Contains(c, "rate_limit"):
		return http.StatusTooManyRequests
	case strings.HasPrefix(c, "invalid"):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// errCutOff is a Responses stream that ended before its terminal event.
var errCutOff = errors.New("openai: the response stream ended before response.completed")

// retryableStreamError reports whether err is a failure that happened after
// the API accepted the request and is worth another attempt. HTTP errors are
// not: the SDK has already retried them.
func retryableStreamError(err error) bool {
	if errors.Is(err, errCutOff) || wire.CutOff(err) {
		return true
	}
	var se *streamError
	return errors.As(err, &se) && wire.Retryable(se.status())
}

// toError turns an error from the SDK or from reading a stream into a
// *provider.Error when the API answered with one, and adds the provider name
// to the others.
func toError(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		if apiErr.Code != "" && !strings.Contains(msg, apiErr.Code) {
			msg = apiErr.Code + ": " + msg
		}
		return &provider.Error{Provider: name, Status: apiErr.StatusCode, Message: msg}
	}
	var se *streamError
	if errors.As(err, &se) {
		msg := se.Message
		if se.Code != "" {
			msg = se.Code + ": " + msg
		}
		return &provider.Error{Provider: name, Status: se.status(), Message: msg}
	}
	if strings.HasPrefix(err.Error(), name+":") {
		return err
	}
	return fmt.Errorf("openai: %w", err)
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// maxErrorText bounds the text of an error answer that becomes a message.
const maxErrorText = 500

// normalizeErrorBody rewrites the body of an error answer into OpenAI's own
// shape, {"error": {"message": …}}, when a server answered in another one:
// {"error": "text"} (Ollama), {"message": …} at the top level (vLLM), or
// plain text (a proxy). The SDK reads only the OpenAI shape; without this it
// would report a decoding error and lose the status, or an empty message.
// Bodies already in the OpenAI shape pass untouched.
func normalizeErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	res.Body.Close()
	if readErr != nil {
		// Leave the SDK to report the status without a message.
		body = nil
	}
	fixed, changed := errorBody(body)
	if changed {
		body = fixed
		res.Header.Set("Content-Type", "application/json")
		res.ContentLength = int64(len(body))
		res.Header.Del("Content-Length")
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// errorBody returns body in the OpenAI error shape, and whether it had to
// change it. An empty message is left for toError to fill in.
func errorBody(body []byte) ([]byte, bool) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message any             `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &v) == nil {
		t := bytes.TrimSpace(v.Error)
		switch {
		case len(t) > 0 && t[0] == '{':
			return body, false
		case len(t) > 0 && t[0] == '"':
			json.Unmarshal(t, &msg)
		case v.Message != nil:
			msg = fmt.Sprint(v.Message)
		default:
			msg = strings.TrimSpace(string(body))
		}
	} else {
		msg = strings.TrimSpace(string(body))
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	out, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg}})
	return out, true
}
