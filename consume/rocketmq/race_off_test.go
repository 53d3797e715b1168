//go:build !race

package rocketmq_test

const raceEnabled = false
