#!/usr/bin/env bash
# Regenerates controller/src/config_schema/kafka_keys.rs and
# controller/testdata/config_values_kafka.tsv from Apache Kafka's jars (Maven Central) and the
# documentation lines in docs.tsv. Needs a JDK (17+) and Maven. Usage: controller/schema/generate.sh
set -euo pipefail
KAFKA_VERSION="${KAFKA_VERSION:-4.1.0}"
here="$(cd "$(dirname "$0")" && pwd)"
controller="$(dirname "$here")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>corum</groupId><artifactId>kafka-config-schema</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${KAFKA_VERSION}</version></dependency>
  </dependencies>
</project>
POM
mvn -q -f "$work/pom.xml" dependency:build-classpath -Dmdep.outputFile="$work/cp.txt"
cp="$(cat "$work/cp.txt")"
javac -nowarn -cp "$cp" -d "$work/classes" "$here/KafkaConfigSchema.java"
java -cp "$work/classes:$cp" KafkaConfigSchema \
  "$here/docs.tsv" \
  "$controller/src/config_schema/kafka_keys.rs" \
  "$controller/testdata/config_values_kafka.tsv" 2> >(grep -v '^SLF4J' >&2)
rustfmt --edition 2021 "$controller/src/config_schema/kafka_keys.rs"
echo "wrote $controller/src/config_schema/kafka_keys.rs and $controller/testdata/config_values_kafka.tsv"
