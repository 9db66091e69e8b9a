//go:build race

package server

// raceDetector: the race detector's shadow memory multiplies RSS, so
// RSS bounds are not checked under it.
const raceDetector = true
