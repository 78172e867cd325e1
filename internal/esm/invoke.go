package esm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Invoker invokes the function synchronously with one shard's event (the JSON of an
// events.KinesisEvent), as the service's Invoke API does.
type Invoker interface {
	Invoke(ctx context.Context, shardID string, event []byte) (Result, error)
}

// Result is a synchronous invocation's answer. An error from Invoke means there was none (the
// function could not be reached).
type Result struct {
	// StatusCode is the Invoke API's (200, or the emulator's error status).
	StatusCode int
	// Payload is the function's response, or its error document ({"errorMessage", "errorType"}).
	Payload []byte
	// FunctionError is "" on success, "Unhandled" when the function returned an error, crashed
	// or timed out (the X-Amz-Function-Error header of the Invoke API).
	FunctionError string
}

// InvokerFunc is a function as an Invoker.
type InvokerFunc func(ctx context.Context, shardID string, event []byte) (Result, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, shardID string, event []byte) (Result, error) {
	return f(ctx, shardID, event)
}

// HandlerInvoker invokes a Kinesis handler (lambda.Handler.Handle) in-process, through JSON as
// the runtime does, with a context ending after timeout (the function's timeout; 0: none). An
// error the handler returns is a function error; a panic too.
func HandlerInvoker(handle func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error), timeout time.Duration) Invoker {
	return InvokerFunc(func(ctx context.Context, _ string, event []byte) (res Result, err error) {
		var in events.KinesisEvent
		if err := json.Unmarshal(event, &in); err != nil {
			return Result{}, fmt.Errorf("esm: decode the event: %w", err)
		}
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		defer func() {
			if p := recover(); p != nil {
				res, err = errorResult("Runtime.Panic", fmt.Sprint(p)), nil
			}
		}()
		out, herr := handle(ctx, in)
		if herr != nil {
			return errorResult(fmt.Sprintf("%T", herr), herr.Error()), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return Result{}, err
		}
		return Result{StatusCode: http.StatusOK, Payload: b}, nil
	})
}

func errorResult(typ, msg string) Result {
	b, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": msg})
	return Result{StatusCode: http.StatusOK, Payload: b, FunctionError: "Unhandled"}
}

// InvokeURL posts event to a Lambda Invoke endpoint (the emulator's
// http://HOST:PORT/2015-03-31/functions/function/invocations) and reads its answer: 200 with an
// X-Amz-Function-Error header or an error document ({"errorType", "errorMessage"} only) is a
// function error, as is any other status (the emulator answers 502 when the runtime crashed or
// failed to start, 504 or a "Task timed out" text on a timeout). Errors: the request failed.
func InvokeURL(ctx context.Context, client *http.Client, url string, event []byte) (Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(event))
	if err != nil {
		return Result{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{}, err
	}
	res := Result{StatusCode: resp.StatusCode, Payload: body, FunctionError: resp.Header.Get("X-Amz-Function-Error")}
	if res.FunctionError == "" && (resp.StatusCode != http.StatusOK || isErrorDoc(body)) {
		res.FunctionError = "Unhandled"
	}
	return res, nil
}

// isErrorDoc reports whether b is the runtime's error document.
func isErrorDoc(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return bytes.HasPrefix(bytes.TrimSpace(b), []byte("Task timed out"))
	}
	_, typ := m["errorType"]
	_, msg := m["errorMessage"]
	_, bif := m["batchItemFailures"]
	return (typ || msg) && !bif
}

// FileDestination returns an OnFailure that appends each record to the file at path as a JSON
// line (the on-failure destination; a queue's messages in AWS).
func FileDestination(path string) func(FailureRecord) {
	var mu sync.Mutex
	return func(r FailureRecord) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(r)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			panic(fmt.Sprintf("esm: on-failure destination %s: %v", path, err))
		}
		defer f.Close()
		if _, err := f.Write(append(b, '\n')); err != nil {
			panic(fmt.Sprintf("esm: on-failure destination %s: %v", path, err))
		}
	}
}
