package image

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The user binary images run as: "nonroot" of the base layer, the same
// numbers as distroless images use.
const (
	NonRootUID = 65532
	NonRootGID = 65532
)

// baseFiles is the base layer of binary images, assembled here instead of
// pulled: the users and groups root, nobody and nonroot, the home of
// nonroot, and a world-writable /tmp. No shell, no package manager, no CA
// certificates and no time zone data (distroless/static holds those two).
var baseFiles = []entry{
	{name: "etc/"},
	{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
	{name: "etc/group", data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
	{name: "etc/nsswitch.conf", data: []byte("hosts: files dns\n")},
	{name: "home/"},
	{name: "home/nonroot/", mode: 0o700, uid: NonRootUID, gid: NonRootGID},
	{name: "root/", mode: 0o700},
	{name: "tmp/", mode: 0o1777},
}

// BinaryOptions say where the executable goes in a binary image and what
// the image config holds besides.
type BinaryOptions struct {
	// Path is the executable's absolute path in the image, e.g. "/manager";
	// it is the image's entrypoint.
	Path string
	// Args are the default arguments (the image's Cmd); optional.
	Args []string
	// Labels are the image labels (org.opencontainers.image.revision, ...).
	Labels map[string]string
	// Env is more of the image's environment (NAME=value), after PATH.
	Env []string
	// Aliases are more absolute paths in the image that hold a copy of the
	// executable, for a program that acts on the name it is called by.
	Aliases []string
}

// BuildBinary builds an image that runs the static Linux executable file:
// a base layer assembled here (nothing is pulled; see baseFiles), then a
// layer holding the executable at opts.Path (mode 0755, owned by root), run
// as NonRootUID:NonRootGID with opts.Path as entrypoint. The image's
// architecture is the executable's (read from its ELF header). Like every
// image of this package it has fixed timestamps, so the same executable and
// options give the same digest.
//
// A dynamically linked executable is refused: the base holds no C library.
func BuildBinary(file string, opts BinaryOptions) (v1.Image, error) {
	for _, p := range append([]string{opts.Path}, opts.Aliases...) {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return nil, fmt.Errorf("binary image: path %q in the image must be absolute and clean, e.g. /manager", p)
		}
	}
	for _, e := range opts.Env {
		if name, _, ok := strings.Cut(e, "="); !ok || name == "" || name == "PATH" {
			return nil, fmt.Errorf("binary image: environment %q must be NAME=value, NAME not PATH", e)
		}
	}
	arch, err := staticArch(file)
	if err != nil {
		return nil, err
	}
	base, err := layerFrom(baseFiles)
	if err != nil {
		return nil, err
	}
	var entries []entry
	for _, p := range append([]string{opts.Path}, opts.Aliases...) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			entries = append(entries, entry{name: strings.TrimPrefix(d, "/") + "/"})
		}
		entries = append(entries, entry{name: strings.TrimPrefix(p, "/"), src: file, mode: 0o755})
	}
	app, err := layerFrom(entries)
	if err != nil {
		return nil, fmt.Errorf("binary image of %s: %w", file, err)
	}
	cfg := v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootGID),
		Entrypoint: []string{opts.Path},
		Cmd:        opts.Args,
		Env:        append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, opts.Env...),
		WorkingDir: "/",
		Labels:     maps.Clone(opts.Labels),
	}
	return assembleFor(cfg, []v1.Layer{base, app},
		[]string{"bundlegen image: base (passwd, group, /tmp, /home/nonroot)", "bundlegen image: COPY " + opts.Path}, arch)
}

// staticArch checks that file is a statically linked Linux ELF executable
// and returns its architecture in GOARCH spelling.
func staticArch(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("binary image: %w", err)
		}
		return "", fmt.Errorf("binary image: %s is not an ELF executable (%w): give a Linux binary built with GOOS=linux", file, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("binary image: %s is an ELF %s, not an executable", file, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary image: %s is dynamically linked, but the image has no C library: build it with CGO_ENABLED=0", file)
		}
	}
	switch {
	case f.Machine == elf.EM_X86_64:
		return "amd64", nil
	case f.Machine == elf.EM_AARCH64:
		return "arm64", nil
	case f.Machine == elf.EM_PPC64 && f.ByteOrder.String() == "LittleEndian":
		return "ppc64le", nil
	case f.Machine == elf.EM_S390:
		return "s390x", nil
	case f.Machine == elf.EM_RISCV && f.Class == elf.ELFCLASS64:
		return "riscv64", nil
	}
	return "", fmt.Errorf("binary image: %s is built for %s, which this tool does not map to an image architecture", file, f.Machine)
}
