// The ping-pong floor's other process: `keyseal-bench-echo PATH REPLY-BYTES` listens on the unix socket PATH,
// accepts one connection and answers every length-prefixed frame with a frame of REPLY-BYTES, as keyseald answers
// a lookup, until the peer closes.
import CKeysealBenchFloors

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 3, let replyBytes = Int32(arguments[2]) else {
    print("usage: keyseal-bench-echo PATH REPLY-BYTES")
    exit(64)
}
exit(keyseal_floor_echo_server(arguments[1], replyBytes))
