package idem

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Lambda's environment, as the runtime sets it for a function (the
// advanced logging controls: a LoggingConfig's LogFormat and
// ApplicationLogLevel).
const (
	// EnvLambdaLogFormat is the function's log format, "JSON" or "Text".
	EnvLambdaLogFormat = "AWS_LAMBDA_LOG_FORMAT"
	// EnvLambdaLogLevel is the function's application log level (TRACE,
	// DEBUG, INFO, WARN, ERROR or FATAL), set with the JSON format: Lambda
	// drops the JSON records below it.
	EnvLambdaLogLevel = "AWS_LAMBDA_LOG_LEVEL"
)

// DefaultLogLevel is the default logger's level where nothing sets one:
// every call that was neither executed nor replayed is logged (see
// Verdict.Level), a success is not.
const DefaultLogLevel = slog.LevelWarn

// DefaultLogger returns the logger of a Runner that WithLogger gives none.
//
// In AWS Lambda (AWS_LAMBDA_FUNCTION_NAME or AWS_LAMBDA_RUNTIME_API is set),
// it writes one record per line to standard output, which Lambda sends to
// CloudWatch Logs, following the function's advanced logging controls:
//   - AWS_LAMBDA_LOG_FORMAT "Text": slog's text form (key=value); otherwise
//     ("JSON", or unset) a JSON object with the keys Lambda reads:
//     "timestamp" (RFC 3339), "level" (TRACE, DEBUG, INFO, WARN, ERROR,
//     FATAL) and "message";
//   - AWS_LAMBDA_LOG_LEVEL, when set (Lambda sets it with the JSON format,
//     INFO unless configured), is its level, so that nothing is written
//     that Lambda would drop; otherwise DefaultLogLevel.
//
// Elsewhere it is the records of DefaultLogLevel and above, handed to the
// handler of slog.Default() as it was when DefaultLogger was called.
//
// The environment is read when DefaultLogger is called (by New).
func DefaultLogger() *slog.Logger {
	return defaultLogger(osGetenv, stdout{})
}

// osGetenv reads the process's environment.
var osGetenv = os.Getenv

// inLambda reports whether the environment is a Lambda function's.
func inLambda(getenv func(string) string) bool {
	return getenv("AWS_LAMBDA_FUNCTION_NAME") != "" || getenv("AWS_LAMBDA_RUNTIME_API") != ""
}

func defaultLogger(getenv func(string) string, w io.Writer) *slog.Logger {
	if !inLambda(getenv) {
		return slog.New(&atLeast{min: DefaultLogLevel, Handler: slog.Default().Handler()})
	}
	opts := &slog.HandlerOptions{Level: lambdaLevel(getenv(EnvLambdaLogLevel)), ReplaceAttr: lambdaKeys}
	if strings.EqualFold(getenv(EnvLambdaLogFormat), "text") {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// stdout writes to os.Stdout as it is at each write.
type stdout struct{}

func (stdout) Write(p []byte) (int, error) { return os.Stdout.Write(p) }

// Lambda's log levels beyond slog's four.
const (
	levelTrace = slog.LevelDebug - 4
	levelFatal = slog.LevelError + 4
)

// lambdaLevel is the slog level of an AWS_LAMBDA_LOG_LEVEL value (any
// case); DefaultLogLevel for an empty or unknown one.
func lambdaLevel(v string) slog.Level {
	switch strings.ToUpper(v) {
	case "TRACE":
		return levelTrace
	case "DEBUG":
		return slog.LevelDebug
	case "INFO":
		return slog.LevelInfo
	case "WARN":
		return slog.LevelWarn
	case "ERROR":
		return slog.LevelError
	case "FATAL":
		return levelFatal
	}
	return DefaultLogLevel
}

// lambdaKeys renames slog's built-in keys to Lambda's ("timestamp",
// "message") and names every level as Lambda does.
func lambdaKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		a.Key = "timestamp"
	case slog.MessageKey:
		a.Key = "message"
	case slog.LevelKey:
		l, _ := a.Value.Any().(slog.Level)
		a.Value = slog.StringValue(LambdaLevel(l))
	}
	return a
}

// LambdaLevel returns the name that Lambda's advanced logging controls
// give the slog level l in a JSON log line's "level": TRACE (below
// slog.LevelDebug), DEBUG, INFO, WARN, ERROR, or FATAL (slog.LevelError+4
// and above). Lambda drops a JSON line whose level is below the function's
// ApplicationLogLevel, and counts a line as INFO when it has no valid level
// or no RFC 3339 "timestamp".
func LambdaLevel(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "TRACE"
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	case l < levelFatal:
		return "ERROR"
	}
	return "FATAL"
}

// LambdaTimestamp returns t as the "timestamp" of a JSON log line for
// Lambda: RFC 3339 in UTC with milliseconds. Lambda's log-level filtering
// uses a line's "level" only when its timestamp is valid RFC 3339, and
// counts it as INFO otherwise.
func LambdaTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// atLeast passes the records of level min and above to Handler.
type atLeast struct {
	min slog.Level
	slog.Handler
}

func (h *atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h *atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &atLeast{min: h.min, Handler: h.Handler.WithAttrs(attrs)}
}

func (h *atLeast) WithGroup(name string) slog.Handler {
	return &atLeast{min: h.min, Handler: h.Handler.WithGroup(name)}
}
