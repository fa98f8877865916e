import Foundation

#if canImport(Glibc)
import Glibc
#endif

func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// A throughput figure: operations per second and latency percentiles, optionally next to a floor.
struct Figure: Codable {
    var name: String
    var operations: Int
    var opsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var floor: String?
    var fractionOfFloor: Double?
    /// The issue's target for `fractionOfFloor` (or for the ratio named in `target`), and whether it was met.
    var target: String?
    var meetsTarget: Bool?
}

/// A single value (a duration, a size) with its target.
struct Measurement: Codable {
    var name: String
    var value: Double
    var unit: String
    var target: String?
    /// value / target limit (≤ 1 meets an upper bound).
    var targetRatio: Double?
    var meetsTarget: Bool?
    var note: String?
}

/// Latency samples in nanoseconds, sorted on demand.
struct Samples {
    var values: [UInt64] = []
    mutating func sort() { values.sort() }
    func percentile(_ p: Double) -> Double {
        Double(values[min(values.count - 1, Int(Double(values.count) * p))]) / 1000
    }
}

/// Times `count` calls of `body`, one sample each.
func measure(_ name: String, count: Int, _ body: (Int) throws -> Void) rethrows -> Figure {
    var samples = Samples()
    samples.values.reserveCapacity(count)
    let start = nanoseconds()
    for index in 0..<count {
        let t0 = nanoseconds()
        try body(index)
        samples.values.append(nanoseconds() - t0)
    }
    let total = Double(nanoseconds() - start) / 1e9
    return figure(name, samples: samples, seconds: total)
}

/// Times several operations in alternation: `rounds` rounds, each running every body `perRound` times in turn.
/// A drift of the machine's speed during the run (other tenants, frequency) then falls on every figure alike, so
/// that their ratios hold even when the absolute figures move. Each figure gets all its samples and the time its
/// own calls took.
func interleaved(rounds: Int, perRound: Int, _ bodies: [(name: String, body: (Int) throws -> Void)]) throws -> [Figure] {
    var samples = Array(repeating: Samples(), count: bodies.count)
    var seconds = Array(repeating: 0.0, count: bodies.count)
    for index in samples.indices { samples[index].values.reserveCapacity(rounds * perRound) }
    for round in 0..<rounds {
        for (slot, entry) in bodies.enumerated() {
            let start = nanoseconds()
            for call in 0..<perRound {
                let t0 = nanoseconds()
                try entry.body(round * perRound + call)
                samples[slot].values.append(nanoseconds() - t0)
            }
            seconds[slot] += Double(nanoseconds() - start) / 1e9
        }
    }
    return bodies.indices.map { figure(bodies[$0].name, samples: samples[$0], seconds: seconds[$0]) }
}

func figure(_ name: String, samples: Samples, seconds: Double) -> Figure {
    var sorted = samples
    sorted.sort()
    return Figure(
        name: name, operations: sorted.values.count, opsPerSecond: Double(sorted.values.count) / seconds,
        p50Microseconds: sorted.percentile(0.5), p99Microseconds: sorted.percentile(0.99))
}

func report(_ figure: Figure) {
    var line = String(
        format: "%-60@ %9.0f ops/s  p50 %8.1f µs  p99 %8.1f µs", figure.name as NSString, figure.opsPerSecond,
        figure.p50Microseconds, figure.p99Microseconds)
    if let floor = figure.floor, let fraction = figure.fractionOfFloor {
        line += String(format: "  %5.1f %% of %@", fraction * 100, floor)
    }
    if let target = figure.target, let meets = figure.meetsTarget {
        line += "  [target \(target): \(meets ? "met" : "MISSED")]"
    }
    print(line)
}

func report(_ measurement: Measurement) {
    var line = String(format: "%-60@ %10.2f %@", measurement.name as NSString, measurement.value, measurement.unit)
    if let target = measurement.target, let ratio = measurement.targetRatio, let meets = measurement.meetsTarget {
        line += String(format: "  %5.2f× of target %@: %@", ratio, target, meets ? "met" : "MISSED")
    }
    if let note = measurement.note { line += "  (\(note))" }
    print(line)
}

/// A measurement against an upper bound.
func atMost(_ name: String, _ value: Double, _ unit: String, limit: Double, note: String? = nil) -> Measurement {
    Measurement(
        name: name, value: value, unit: unit, target: String(format: "≤ %.0f %@", limit, unit),
        targetRatio: value / limit, meetsTarget: value <= limit, note: note)
}

/// The results of one run, written as JSON.
final class Results {
    var figures: [Figure] = []
    var measurements: [Measurement] = []
    var notes: [String] = []

    func add(_ figure: Figure) {
        report(figure)
        figures.append(figure)
    }

    func add(_ measurement: Measurement) {
        report(measurement)
        measurements.append(measurement)
    }

    func note(_ text: String) {
        print("note: \(text)")
        notes.append(text)
    }

    struct Document: Codable {
        var build: String
        var quick: Bool
        var sections: [String]
        var figures: [Figure]
        var measurements: [Measurement]
        var notes: [String]
    }

    func write(directory: String, quick: Bool, sections: [String]) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
        let path = "\(directory)/bench-\(stamp).json"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        let document = Document(
            build: build, quick: quick, sections: sections, figures: figures, measurements: measurements, notes: notes)
        try encoder.encode(document).write(to: URL(fileURLWithPath: path))
        return path
    }
}
