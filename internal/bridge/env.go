package bridge

import (
	"slices"
	"strings"
)

// defaultEnv names what a child gets of the bridge's environment, as MCP
// clients do for stdio servers (the official TypeScript SDK's
// getDefaultEnvironment, plus the locale and the temporary folder): enough
// to find programs and a home folder, nothing that holds a secret. The
// bridge's own SPACEFIX_API_KEY, SPACEFIX_TOKEN and the rest of the shell's
// secrets stay out; a server's config "env" names anything more.
var defaultEnv = map[string][]string{
	"unix":    {"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"},
	"windows": {"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE"},
}

// childEnv is a child's environment: the variables of environ (KEY=value
// lines, as os.Environ gives) that defaultEnv names for goos, then extra
// (the server's config env), which wins over them. Names compare without
// case on Windows, where Path and PATH are one. A value that starts with
// "()" (an exported shell function, the Shellshock vector) is left out, as
// the TypeScript SDK does.
func childEnv(goos string, environ []string, extra map[string]string) []string {
	names := defaultEnv["unix"]
	fold := func(s string) string { return s }
	if goos == "windows" {
		names, fold = defaultEnv["windows"], strings.ToUpper
	}
	out := []string{} // never nil: a nil Env makes exec pass the whole environment
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(names, fold(k)) || strings.HasPrefix(v, "()") {
			continue
		}
		if setIn(extra, k, fold) {
			continue
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out
}

// setIn reports whether extra sets k (compared through fold).
func setIn(extra map[string]string, k string, fold func(string) string) bool {
	for e := range extra {
		if fold(e) == fold(k) {
			return true
		}
	}
	return false
}
