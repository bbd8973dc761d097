#!/usr/bin/env bash
# Bootstraps and runs sbt on a machine that has only Java and Maven.
# The launcher is fetched once through the ordinary Maven client and cached under
# ~/.sbt/launchers; sbt and every build dependency then resolve from Maven Central only.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sbt_version=$(sed -n 's/^sbt\.version *= *//p' "$here/project/build.properties")
launcher_dir="${SBT_LAUNCHER_HOME:-$HOME/.sbt/launchers}/$sbt_version"
launcher="$launcher_dir/sbt-launch-$sbt_version.jar"

if [ ! -s "$launcher" ]; then
  command -v mvn >/dev/null || { echo "sbt bootstrap: Maven (mvn) is needed to fetch the sbt launcher" >&2; exit 1; }
  mkdir -p "$launcher_dir"
  echo "sbt bootstrap: fetching sbt launcher $sbt_version with Maven" >&2
  mvn -q -B dependency:copy "-Dartifact=org.scala-sbt:sbt-launch:$sbt_version" \
    "-DoutputDirectory=$launcher_dir" >&2
fi

# Resolve only from the local caches and Maven Central (the default launcher config
# also lists Ivy repositories that are not reachable from every network).
repos="$launcher_dir/repositories"
[ -s "$repos" ] || printf '[repositories]\n  local\n  maven-central\n' >"$repos"

exec java ${SBT_JAVA_OPTS:--Xms512m -Xmx3g -Xss4m} \
  -Dsbt.repository.config="$repos" \
  -Dsbt.override.build.repos=true \
  -Dsbt.server.forcestart=false \
  -Dsbt.supershell=false \
  -Dsbt.color=false \
  -Dsbt.ci=true \
  -jar "$launcher" "$@"
