// The CLI benchmark's yardstick: a minimal Swift program with no Foundation, which prints one line.
print("s3cret")
