// Kafka's own code as the judge of corum's metadata record codecs (kafka/tests/metadata_kafka.rs
// drives it). Compiled by compat/install.sh against compat/jars, run as
//   java -cp 'compat/build/classes:compat/jars/*' MetadataRecordCheck
//
// Reads one command per line from stdin and prints one answer line per command, in order:
//
//   TYPES                  every MetadataRecordType: "OK key:name:lowest-highest,..." by key
//   KRAFT_TYPE             KRaftVersionRecord's "OK key:name:lowest-highest" (key -1: none)
//   M <hex>                decodes a framed metadata record with MetadataRecordSerde (which
//                          refuses bytes after the record), writes it back with the same serde:
//                          "OK <hex> <json>" (the JSON of Kafka's MetadataJsonConverters)
//   K <version> <hex>      the same for a KRaftVersionRecord body at <version> (nothing may
//                          follow it)
//   DM <key> <version>     a default metadata record (MetadataRecordType.newMetadataRecord())
//                          framed at <version>: "OK <hex> <json>"
//   DK <version>           a default KRaftVersionRecord at <version>: "OK <hex> <json>"
//   J <key> <version> <json>
//                          a metadata record read from JSON (MetadataJsonConverters.readJson),
//                          framed at <version>: "OK <hex> <json>"
//   JK <version> <json>    a KRaftVersionRecord read from JSON at <version>: "OK <hex> <json>"
//
// A command Kafka refuses answers "ERR <exception>"; an unknown command exits 2.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.message.KRaftVersionRecord;
import org.apache.kafka.common.message.KRaftVersionRecordJsonConverter;
import org.apache.kafka.common.metadata.MetadataJsonConverters;
import org.apache.kafka.common.metadata.MetadataRecordType;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public final class MetadataRecordCheck {
    private static final HexFormat HEX = HexFormat.of();
    private static final ObjectMapper JSON = new ObjectMapper();

    private MetadataRecordCheck() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            // JSON, the last word of J and JK, may hold spaces.
            String command = line.split(" ", 2)[0];
            String[] words = line.split(" ", command.equals("J") ? 4 : command.equals("JK") ? 3 : -1);
            String answer;
            try {
                answer = "OK " + answer(words);
            } catch (UnknownCommand e) {
                System.err.println("MetadataRecordCheck: unknown command: " + line);
                System.exit(2);
                return;
            } catch (Exception e) {
                answer = "ERR " + String.valueOf(e).replace('\n', ' ');
            }
            out.println(answer);
        }
        out.flush();
    }

    private static final class UnknownCommand extends Exception {
        private static final long serialVersionUID = 1L;
    }

    private static String answer(String[] words) throws Exception {
        switch (words[0]) {
            case "TYPES": {
                List<String> types = new ArrayList<>();
                MetadataRecordType[] all = MetadataRecordType.values();
                Arrays.sort(all, Comparator.comparingInt(MetadataRecordType::id));
                for (MetadataRecordType t : all) {
                    types.add(t.id() + ":" + t.newMetadataRecord().getClass().getSimpleName() + ":"
                        + t.lowestSupportedVersion() + "-" + t.highestSupportedVersion());
                }
                return String.join(",", types);
            }
            case "KRAFT_TYPE": {
                KRaftVersionRecord r = new KRaftVersionRecord();
                return r.apiKey() + ":KRaftVersionRecord:" + r.lowestSupportedVersion() + "-"
                    + r.highestSupportedVersion();
            }
            case "M": {
                byte[] bytes = HEX.parseHex(words[1]);
                ApiMessageAndVersion record =
                    MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(ByteBuffer.wrap(bytes)), bytes.length);
                return framed(record);
            }
            case "K": {
                short version = Short.parseShort(words[1]);
                ByteBuffer bytes = ByteBuffer.wrap(HEX.parseHex(words[2]));
                KRaftVersionRecord record = new KRaftVersionRecord(new ByteBufferAccessor(bytes), version);
                if (bytes.hasRemaining()) {
                    throw new IllegalArgumentException(bytes.remaining() + " bytes after the record");
                }
                return kraftVersion(record, version);
            }
            case "DM": {
                MetadataRecordType type = MetadataRecordType.fromId(Short.parseShort(words[1]));
                return framed(new ApiMessageAndVersion(type.newMetadataRecord(), Short.parseShort(words[2])));
            }
            case "DK":
                return kraftVersion(new KRaftVersionRecord(), Short.parseShort(words[1]));
            case "J": {
                short apiKey = Short.parseShort(words[1]);
                short version = Short.parseShort(words[2]);
                JsonNode json = JSON.readTree(words[3]);
                return framed(new ApiMessageAndVersion(MetadataJsonConverters.readJson(json, apiKey, version), version));
            }
            case "JK": {
                short version = Short.parseShort(words[1]);
                return kraftVersion(KRaftVersionRecordJsonConverter.read(JSON.readTree(words[2]), version), version);
            }
            default:
                throw new UnknownCommand();
        }
    }

    /** The record framed by MetadataRecordSerde, in hex, and its JSON. */
    private static String framed(ApiMessageAndVersion record) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buf = ByteBuffer.allocate(MetadataRecordSerde.INSTANCE.recordSize(record, cache));
        MetadataRecordSerde.INSTANCE.write(record, cache, new ByteBufferAccessor(buf));
        if (buf.hasRemaining()) {
            throw new IllegalStateException("recordSize exceeds what write wrote by " + buf.remaining());
        }
        return HEX.formatHex(buf.array()) + " "
            + MetadataJsonConverters.writeJson(record.message(), record.version());
    }

    private static String kraftVersion(KRaftVersionRecord record, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buf = ByteBuffer.allocate(record.size(cache, version));
        record.write(new ByteBufferAccessor(buf), cache, version);
        if (buf.hasRemaining()) {
            throw new IllegalStateException("size exceeds what write wrote by " + buf.remaining());
        }
        return HEX.formatHex(buf.array()) + " " + KRaftVersionRecordJsonConverter.write(record, version);
    }
}
