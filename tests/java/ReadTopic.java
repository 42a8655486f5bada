/*
 * ReadTopic: read one topic-partition with the Java KafkaConsumer and print
 * every record as one JSON line, for aioproducer's read-back tests
 * (tests/integration/readback.py, read_java).
 *
 * Why Java: kafka-clients has its own record-batch decoder, CRC-32C check and
 * decompressors (snappy-java, lz4-java, zstd-jni), written independently of
 * the three Python-side readers; it is the reference consumer every broker
 * release is tested with.
 *
 * Usage:
 *   java -cp 'classes:libs/*' ReadTopic BOOTSTRAP TOPIC PARTITION START_OFFSET COUNT TIMEOUT_MS
 *        ISOLATION_LEVEL [key=value ...]
 *
 * The partition is assigned directly and the consumer seeks to START_OFFSET:
 * no group, no commits. Extra key=value arguments are consumer properties
 * applied last (so they may override the defaults, e.g. check.crcs=false, or
 * add security.protocol=SASL_SSL and friends).
 *
 * Output, one line per record on stdout, pure ASCII (non-ASCII escaped), so
 * the platform's default charset does not matter:
 *   {"offset":0,"timestamp":1700000000123,"timestampType":"CreateTime",
 *    "key":"a2V5","value":null,"headers":[["h","dg=="],["n",null]],"leaderEpoch":0}
 * key, value and header values are base64 (null stays null); header order and
 * duplicates are kept; leaderEpoch is null when the batch carries none.
 *
 * Exit status: 0 when COUNT records were printed; 3 when fewer arrived before
 * the timeout (those that did are printed); 2 on a consumer error; 64 on bad
 * arguments. Every failure ends with one "ReadTopic: ..." line on stderr.
 * Logging goes to stderr (see log4j2.properties beside this file), keeping
 * stdout for records only.
 */

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ReadTopic {
    static final int EXIT_ERROR = 2;
    static final int EXIT_TIMEOUT = 3;
    static final int EXIT_USAGE = 64;

    /** One poll blocks at most this long, so the overall timeout is kept closely. */
    static final long POLL_MS = 500;

    private ReadTopic() {}

    /** Arguments, parsed once; a bad one is a usage error rather than a consumer error. */
    record Args(String bootstrap, TopicPartition tp, long start, int count, long timeoutMs,
                String isolation, List<String> extra) {
        static Args parse(String[] a) {
            if (a.length < 7) {
                throw new IllegalArgumentException("expected at least 7 arguments, got " + a.length
                        + ": BOOTSTRAP TOPIC PARTITION START_OFFSET COUNT TIMEOUT_MS ISOLATION_LEVEL [key=value ...]");
            }
            String isolation = a[6].toLowerCase(Locale.ROOT);
            if (!isolation.equals("read_uncommitted") && !isolation.equals("read_committed")) {
                throw new IllegalArgumentException("isolation level must be read_uncommitted or read_committed, got " + a[6]);
            }
            for (int i = 7; i < a.length; i++) {
                if (a[i].indexOf('=') <= 0) {
                    throw new IllegalArgumentException("extra property must be key=value, got " + a[i]);
                }
            }
            return new Args(a[0], new TopicPartition(a[1], Integer.parseInt(a[2])), Long.parseLong(a[3]),
                    Integer.parseInt(a[4]), Long.parseLong(a[5]), isolation, List.of(a).subList(7, a.length));
        }
    }

    public static void main(String[] argv) {
        Args args;
        try {
            args = Args.parse(argv);
        } catch (IllegalArgumentException e) {
            System.err.println("ReadTopic: usage: " + e.getMessage());
            System.exit(EXIT_USAGE);
            return;
        }
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16);
        int status;
        try {
            status = read(args, out);
        } catch (Exception e) {
            status = EXIT_ERROR;
            flushQuietly(out);
            System.err.println("ReadTopic: error: " + e.getClass().getName() + ": " + e.getMessage());
        }
        flushQuietly(out);
        System.exit(status);
    }

    static Properties consumerProperties(Args args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.bootstrap());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "aioproducer-readback-java");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args.isolation());
        // A start offset outside the log is the test's mistake: fail rather than silently reset.
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        // close() waits for the fetch in flight; at the default 500 ms that is half a second per read.
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        for (String kv : args.extra()) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    /** Poll until COUNT records are written or the deadline passes; returns the exit status. */
    static int read(Args args, Writer out) throws IOException {
        long deadline = System.nanoTime() + args.timeoutMs() * 1_000_000L;
        int got = 0;
        long lastOffset = -1;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties(args))) {
            consumer.assign(List.of(args.tp()));
            consumer.seek(args.tp(), args.start());
            while (got < args.count()) {
                long remainingMs = (deadline - System.nanoTime()) / 1_000_000L;
                if (remainingMs <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(Math.min(remainingMs, POLL_MS)))) {
                    if (got == args.count()) {
                        break;
                    }
                    out.write(toJson(r));
                    out.write('\n');
                    lastOffset = r.offset();
                    got++;
                }
            }
        }
        if (got < args.count()) {
            out.flush();
            System.err.printf("ReadTopic: timeout: read %d of %d records from %s starting at offset %d within %d ms%s%n",
                    got, args.count(), args.tp(), args.start(), args.timeoutMs(),
                    got > 0 ? ", last offset " + lastOffset : "");
            return EXIT_TIMEOUT;
        }
        return 0;
    }

    static String toJson(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder(128);
        sb.append("{\"offset\":").append(r.offset())
          .append(",\"timestamp\":").append(r.timestamp())
          .append(",\"timestampType\":");
        string(sb, r.timestampType().name);
        sb.append(",\"key\":");
        bytes(sb, r.key());
        sb.append(",\"value\":");
        bytes(sb, r.value());
        sb.append(",\"headers\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            sb.append(first ? "[" : ",[");
            first = false;
            string(sb, h.key());
            sb.append(',');
            bytes(sb, h.value());
            sb.append(']');
        }
        sb.append("],\"leaderEpoch\":");
        Optional<Integer> epoch = r.leaderEpoch();
        sb.append(epoch.isPresent() ? epoch.get().toString() : "null");
        return sb.append('}').toString();
    }

    static void bytes(StringBuilder sb, byte[] b) {
        if (b == null) {
            sb.append("null");
        } else {
            sb.append('"').append(Base64.getEncoder().encodeToString(b)).append('"');
        }
    }

    /** A JSON string with everything outside printable ASCII escaped as UTF-16 code units (RFC 8259 s7). */
    static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }

    static void flushQuietly(Writer out) {
        try {
            out.flush();
        } catch (IOException ignored) {
            // stdout is gone (the reader was killed): nothing left to tell it.
        }
    }
}
