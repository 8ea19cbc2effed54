// Package opmequiv checks that bundlegen's directory render of a catalog is
// what `opm alpha render-template semver` makes of the same bundles pushed as
// images. It generates synthetic bundle directories, pushes their images to a
// registry (image.BuildBundle) and runs operator-registry's own template code
// path against that registry, exactly as opm's command does. The equivalence
// test and `make bench-catalog` use it; release code does not.
package opmequiv
