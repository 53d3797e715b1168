// Command composecheck is `docker compose config` without a Docker
// engine: it loads a compose file with compose-go, the library the
// docker compose CLI itself loads files with, which validates the file
// against the compose-spec JSON schema embedded in it, interpolates the
// environment and normalises the project. It then checks what compose
// only finds out at `up`: every bind-mounted path and build context
// exists on disk. It prints the normalised project, as `docker compose
// config` does, and exits 1 on the first problem.
//
// Usage (from the module directory, see scripts/deploy-check.sh):
//
//	go run . [-q] path/to/compose.yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func main() {
	quiet := flag.Bool("q", false, "print nothing on success")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: composecheck [-q] compose.yaml")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
}

func run(path string, quiet bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)), cli.WithOsEnv, cli.WithConsistency(true))
	if err != nil {
		return err
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		return err
	}
	if err := checkPaths(project); err != nil {
		return err
	}
	if quiet {
		return nil
	}
	out, err := project.MarshalYAML()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// checkPaths reports bind mounts and build contexts that do not exist:
// compose would create a missing bind source as an empty directory, and
// a missing context fails only at build time.
func checkPaths(p *types.Project) error {
	var problems []error
	names := p.ServiceNames()
	sort.Strings(names)
	for _, name := range names {
		s := p.Services[name]
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				problems = append(problems, fmt.Errorf("service %s: build: %w", name, err))
			}
		}
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				problems = append(problems, fmt.Errorf("service %s: bind mount %s: %w", name, v.Target, err))
			}
		}
	}
	for name, s := range p.Secrets {
		if s.File != "" {
			if _, err := os.Stat(s.File); err != nil {
				problems = append(problems, fmt.Errorf("secret %s: %w", name, err))
			}
		}
	}
	return errors.Join(problems...)
}
