package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The CLI's flags are written --name everywhere (the docs, the help), and a
// mistake is said once, with what was probably meant.

// printFlags prints fs's flags for --help, in the --name form, after the
// command's own usage text if it has one (helpText). A default is shown
// as the flag would be typed: quoted only for a string, and not at all
// when it is the zero value (a usage that names its default says more).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	if text, ok := helpText[fs.Name()]; ok {
		fmt.Fprint(w, text, "\nFlags:\n")
	} else {
		fmt.Fprintf(w, "Usage of spacefix %s:\n", fs.Name())
	}
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if def := f.DefValue; !slices.Contains([]string{"", "false", "0", "0s"}, def) {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// flagError turns the flag package's complaint about args into a usage
// error for people: --name, and a suggestion for a mistyped flag.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = fmt.Sprintf("unknown flag --%s", name)
		if s := suggest(name, names); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	} else {
		// Only the flag package's own words name the flag; what a
		// flag's Set said after them is kept as it was written.
		for _, single := range []string{"flag -", "for -", "argument: -"} {
			msg = strings.Replace(msg, single, single+"-", 1)
		}
	}
	return usageError{fmt.Sprintf("%s: %s (see spacefix %s --help)", fs.Name(), msg, fs.Name())}
}

// suggest returns the one of names closest to typed, if it is close enough
// to be a slip (two edits, or a prefix of it), else "".
func suggest(typed string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(typed, n)
		if strings.HasPrefix(n, typed) && len(typed) >= 3 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// unknownCommand is the usage error for a command name that is none of
// names, with a suggestion.
func unknownCommand(group, typed string, names []string, want string) error {
	where := "unknown command"
	if group != "" {
		where = group + ": unknown command"
	}
	msg := fmt.Sprintf("%s %q", where, typed)
	if s := suggest(typed, names); s != "" && !slices.Contains(names, typed) {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if want != "" {
		msg += "; want " + want
	}
	return usageError{msg}
}

// apiFieldFlags rewrites an admin API error that names a request field
// ("cacheSeconds: …") to name the flag that set it ("--cache: …").
func apiFieldFlags(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	field, rest, ok := strings.Cut(err.Error(), ": ")
	if f, known := flags[field]; ok && known {
		return fmt.Errorf("--%s: %s", f, rest)
	}
	return err
}
