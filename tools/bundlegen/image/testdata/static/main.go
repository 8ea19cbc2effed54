// Command static is a tiny program the tests build as a static executable
// to put in a binary image.
package main

func main() {}
