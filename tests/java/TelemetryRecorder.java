import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

/**
 * A broker-side client-metrics reporter for aioproducer's telemetry tests (KIP-714).
 *
 * Named in the broker's metric.reporters; the broker hands it every PushTelemetry it accepts.
 * Each push becomes one JSON line in the file of the broker property telemetry.recorder.file:
 * the client instance id, the client id, whether it was the terminating push, the content
 * type and the OTLP bytes (base64) as the broker passed them. The test decodes them.
 * Both Kafka 4.3 entry points (ClientTelemetry and ClientTelemetryExporterProvider) lead here.
 */
public class TelemetryRecorder implements MetricsReporter, ClientTelemetry, ClientTelemetryExporterProvider {
    private String file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get("telemetry.recorder.file");
        file = value == null ? null : value.toString();
    }

    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> record(context, payload);
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> record(context.authorizableRequestContext(), payload);
    }

    private synchronized void record(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        if (file == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String line = "{\"client_instance_id\":\"" + payload.clientInstanceId()
            + "\",\"client_id\":\"" + (context == null ? "" : context.clientId())
            + "\",\"terminating\":" + payload.isTerminating()
            + ",\"content_type\":\"" + payload.contentType()
            + "\",\"data\":\"" + Base64.getEncoder().encodeToString(bytes) + "\"}\n";
        try (Writer out = new FileWriter(file, StandardCharsets.UTF_8, true)) {
            out.write(line);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
