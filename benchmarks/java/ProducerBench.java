import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java peer of the benchmark suite: Apache Kafka's own {@code KafkaProducer}, driven the way
 * {@code benchmarks/clients.py} drives the Python clients, so its row can sit in the same table.
 *
 * <p>Usage: {@code java -cp <kafka libs>/*:<classes> ProducerBench <spec.properties> <pools.bin>}.
 * The spec is the scenario as {@code key=value} lines (the keys of {@code Scenario.as_dict()} plus
 * client, topic, warmup_topic, partitions, bootstrap); the pools file holds the same key and value
 * pools the Python workers build ({@code make_keys()}, {@code make_values(size)}), written by Python
 * so nothing about them has to be reimplemented here. Record {@code i} gets value
 * {@code values[i & (nv-1)]} and key {@code keys[i & (nk-1)]}, as in the Python loops.
 *
 * <p>The last stdout line is the worker result as JSON, with the fields {@code benchmarks/worker.py}
 * writes; logging goes to stderr.
 */
public final class ProducerBench {
    private static final byte[] WARMUP = "warm-up".getBytes();

    private ProducerBench() {}

    public static void main(String[] args) throws Exception {
        Properties spec = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            spec.load(in);
        }
        byte[][] keys;
        byte[][] values;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(args[1])))) {
            keys = readPool(in);
            values = readPool(in);
        }
        if (!"true".equals(spec.getProperty("keyed"))) {
            keys = null;
        }
        // Load the client's classes before the baseline, as the Python worker imports its library first.
        Class.forName(KafkaProducer.class.getName());
        System.gc();
        double baseline = statusMb("VmRSS");

        long wallStart = System.nanoTime();
        Outcome outcome;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config(spec))) {
            warmUp(producer, spec);
            if (!"throughput".equals(spec.getProperty("mode"))) {
                outcome = paced(producer, spec, keys, values);
            } else if ("java-counter".equals(spec.getProperty("client"))) {
                outcome = sharedCallback(producer, spec, keys, values);
            } else {
                outcome = throughput(producer, spec, keys, values);
            }
        }
        double wall = (System.nanoTime() - wallStart) / 1e9;
        double peak = statusMb("VmHWM");

        int n = Integer.parseInt(spec.getProperty("records"));
        int valueSize = Integer.parseInt(spec.getProperty("value_size"));
        StringBuilder json = new StringBuilder("{");
        field(json, "offered", Integer.toString(n));
        field(json, "acked", Integer.toString(outcome.acked));
        field(json, "errors", Integer.toString(outcome.errors));
        field(json, "first_error", outcome.firstError == null ? "null" : quote(outcome.firstError));
        field(json, "elapsed_s", num(outcome.elapsedS));
        field(json, "wall_s", num(wall));
        field(json, "records_per_s", num(n / outcome.elapsedS));
        field(json, "mb_per_s", num((double) n * valueSize / outcome.elapsedS / 1e6));
        field(json, "rss_baseline_mb", num(baseline));
        field(json, "rss_peak_mb", num(peak));
        field(json, "notes", "[]");  // the suite reads notes as problems
        field(json, "jvm_max_heap_mb", Long.toString(Runtime.getRuntime().maxMemory() >> 20));
        if (outcome.latenciesS != null) {
            double[] lat = outcome.latenciesS;
            Arrays.sort(lat);
            json.append("\"latency_ms\": {");
            field(json, "p50", num(percentile(lat, 0.50) * 1e3));
            field(json, "p99", num(percentile(lat, 0.99) * 1e3));
            field(json, "p999", num(percentile(lat, 0.999) * 1e3));
            field(json, "max", num(lat.length > 0 ? lat[lat.length - 1] * 1e3 : Double.NaN));
            json.append("\"count\": ").append(lat.length).append("}, ");
        }
        json.setLength(json.length() - 2);
        json.append("}");
        System.out.println(json);
        System.out.flush();
    }

    /** What a run observed, as {@code clients.Outcome} in Python. */
    private static final class Outcome {
        final int acked;
        final int errors;
        final String firstError;
        final double elapsedS;
        final double[] latenciesS;

        Outcome(int acked, int errors, String firstError, double elapsedS, double[] latenciesS) {
            this.acked = acked;
            this.errors = errors;
            this.firstError = firstError;
            this.elapsedS = elapsedS;
            this.latenciesS = latenciesS;
        }
    }

    private static Properties config(Properties spec) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, spec.getProperty("bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, spec.getProperty("acks"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, spec.getProperty("linger_ms"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, spec.getProperty("compression"));
        // Explicit either way: since Kafka 3.0 the Java default is true, and true with acks=1 is a config error.
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, spec.getProperty("idempotence"));
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, spec.getProperty("buffer_memory"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    /** One record to every partition of the warm-up topic, each acknowledged, before any clock starts. */
    private static void warmUp(KafkaProducer<byte[], byte[]> producer, Properties spec) throws Exception {
        producer.partitionsFor(spec.getProperty("topic"));
        String warm = spec.getProperty("warmup_topic");
        int partitions = Integer.parseInt(spec.getProperty("partitions"));
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            futures.add(producer.send(new ProducerRecord<>(warm, p, null, WARMUP)));
        }
        producer.flush();
        for (Future<RecordMetadata> f : futures) {
            f.get();
        }
    }

    /**
     * No futures kept: one counting callback shared by every send, then flush (callbacks run before
     * flush returns). The pattern of {@code aioproducer-counter} and of the C Producer's row.
     */
    private static Outcome sharedCallback(KafkaProducer<byte[], byte[]> producer, Properties spec,
                                          byte[][] keys, byte[][] values) {
        String topic = spec.getProperty("topic");
        int n = Integer.parseInt(spec.getProperty("records"));
        int vm = values.length - 1;
        int km = keys == null ? 0 : keys.length - 1;
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        AtomicReference<String> first = new AtomicReference<>();
        Callback counter = (md, exc) -> {
            if (exc == null) {
                acked.incrementAndGet();
            } else {
                errors.incrementAndGet();
                first.compareAndSet(null, String.valueOf(exc));
            }
        };
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            producer.send(new ProducerRecord<>(topic, keys == null ? null : keys[i & km], values[i & vm]), counter);
        }
        producer.flush();
        double elapsed = (System.nanoTime() - t0) / 1e9;
        return new Outcome(acked.get(), errors.get(), first.get(), elapsed, null);
    }

    /** Futures kept, as the Python throughput loops keep theirs: send all, flush, then check every one. */
    private static Outcome throughput(KafkaProducer<byte[], byte[]> producer, Properties spec,
                                      byte[][] keys, byte[][] values) {
        String topic = spec.getProperty("topic");
        int n = Integer.parseInt(spec.getProperty("records"));
        int vm = values.length - 1;
        int km = keys == null ? 0 : keys.length - 1;
        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            futures.add(producer.send(new ProducerRecord<>(topic, keys == null ? null : keys[i & km], values[i & vm])));
        }
        producer.flush();
        int acked = 0;
        int errors = 0;
        String first = null;
        for (Future<RecordMetadata> f : futures) {
            try {
                f.get();
                acked++;
            } catch (Exception e) {
                errors++;
                if (first == null) {
                    first = String.valueOf(e.getCause());
                }
            }
        }
        double elapsed = (System.nanoTime() - t0) / 1e9;
        return new Outcome(acked, errors, first, elapsed, null);
    }

    /**
     * Latency and memory modes: records offered at {@code rate} per second (0: as fast as {@code send}
     * accepts them), acknowledgements counted in callbacks. Latency is from each record's scheduled send
     * time, {@code t0 + i / rate}, to its callback, so falling behind the rate is paid for.
     */
    private static Outcome paced(KafkaProducer<byte[], byte[]> producer, Properties spec,
                                 byte[][] keys, byte[][] values) throws InterruptedException {
        String topic = spec.getProperty("topic");
        int n = Integer.parseInt(spec.getProperty("records"));
        int rate = Integer.parseInt(spec.getProperty("rate"));
        int vm = values.length - 1;
        int km = keys == null ? 0 : keys.length - 1;
        long[] ackTimes = rate > 0 ? new long[n] : null;
        byte[] flags = new byte[n];
        AtomicInteger errors = new AtomicInteger();
        AtomicReference<String> first = new AtomicReference<>();
        long t0 = System.nanoTime();
        int i = 0;
        while (i < n) {
            int due = rate == 0 ? n : (int) Math.min(n, (System.nanoTime() - t0) * (long) rate / 1_000_000_000L + 1);
            for (; i < due; i++) {
                final int index = i;
                Callback callback = (md, exc) -> {
                    if (ackTimes != null) {
                        ackTimes[index] = System.nanoTime();
                    }
                    flags[index] = exc == null ? (byte) 1 : (byte) 2;
                    if (exc != null) {
                        errors.incrementAndGet();
                        first.compareAndSet(null, exc.toString());
                    }
                };
                producer.send(new ProducerRecord<>(topic, keys == null ? null : keys[i & km], values[i & vm]), callback);
            }
            if (rate > 0) {
                Thread.sleep(1);
            }
        }
        // flush() returns once every batch's future is done, and callbacks run before that.
        producer.flush();
        double elapsed = (System.nanoTime() - t0) / 1e9;
        int acked = 0;
        for (byte f : flags) {
            acked += f == 1 ? 1 : 0;
        }
        double[] latencies = null;
        if (ackTimes != null) {
            double[] all = new double[n];
            int m = 0;
            for (int j = 0; j < n; j++) {
                if (flags[j] == 1) {
                    long scheduled = t0 + (long) ((double) j / rate * 1e9);
                    all[m++] = (ackTimes[j] - scheduled) / 1e9;
                }
            }
            latencies = Arrays.copyOf(all, m);
        }
        return new Outcome(acked, errors.get(), first.get(), elapsed, latencies);
    }

    private static byte[][] readPool(DataInputStream in) throws IOException {
        int count = in.readInt();
        byte[][] pool = new byte[count][];
        for (int i = 0; i < count; i++) {
            pool[i] = new byte[in.readInt()];
            in.readFully(pool[i]);
        }
        return pool;
    }

    /** As {@code _percentile} in worker.py; {@code Math.rint} rounds half to even, as Python's round does. */
    private static double percentile(double[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int index = (int) Math.min(sorted.length - 1, Math.max(0, Math.rint(q * sorted.length) - 1));
        return sorted[index];
    }

    /** VmRSS or VmHWM of this JVM from /proc, in MB (the Python worker reads the same fields). */
    private static double statusMb(String name) throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith(name + ":")) {
                return Long.parseLong(line.split("\\s+")[1]) / 1024.0;
            }
        }
        throw new IOException("no " + name + " in /proc/self/status");
    }

    private static void field(StringBuilder json, String name, String value) {
        json.append('"').append(name).append("\": ").append(value).append(", ");
    }

    private static String num(double x) {
        return Double.isFinite(x) ? String.format(Locale.ROOT, "%.6f", x) : "NaN";
    }

    private static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
