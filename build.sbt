// mmlspark build: the runtime library (scala/) and the build-only code generator (codegen/).
//
// The library is cross-built, one jar per entry of SparkLines.jars (project/SparkLines.scala):
// Scala 2.13 against Spark 4.3 for every 4.x line, Scala 2.12 against Spark 3.5. Spark is a
// provided dependency taken from the jars inside that line's pyspark (the primary line's in .venv,
// SPARK_JARS_DIR; the others' in .lines/<line>, made by `scripts/spark_lines.py venv`), so each
// jar is compiled against exactly the Spark it runs on, and nothing of Spark is downloaded twice.
// `+core/exportPackagedJar` builds all of them.

import java.nio.file.Files

import mmlspark.codegen.{SharedParams, SparkJar, SparkLines, StageParams}

ThisBuild / organization := "mmlspark"
ThisBuild / version := IO.read(file("VERSION")).trim
ThisBuild / scalaVersion := SparkLines.primary.scalaVersion
ThisBuild / scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-release", "17")
ThisBuild / javacOptions ++= Seq("--release", "17")

val onnxRuntimeVersion = "1.29.0"
// The ONNX Runtime build the jar depends on: the CPU build, or with MMLSPARK_ONNXRUNTIME=gpu the
// GPU build (CUDA 12, cuDNN 9; 370 MB) for a self-contained jar that runs on GPU clusters.
val onnxRuntimeArtifact = sys.env.get("MMLSPARK_ONNXRUNTIME") match {
  case None | Some("cpu") => "onnxruntime"
  case Some("gpu") => "onnxruntime_gpu"
  case Some(other) => sys.error(s"MMLSPARK_ONNXRUNTIME must be cpu or gpu, not '$other'")
}
val scalatest = "org.scalatest" %% "scalatest" % "3.2.19" % Test

// The jar being built (by the Scala version sbt is switched to).
val sparkJar = settingKey[SparkJar]("The Spark line jar this Scala version builds")

// The Spark jars inside the pyspark of `jar`'s line: checked to be that Spark and to hold the
// json4s we compile against. JSON (param values, model specs, saved metadata) is written with
// json4s, the library Spark's own ML persistence uses and hands to us (ParamsIO).
def sparkJarsDir(base: File, jar: SparkJar): File = {
  val line = jar.lines.last
  val (envName, venv) =
    if (jar == SparkLines.primary) ("SPARK_JARS_DIR", base / ".venv")
    else (s"SPARK_JARS_DIR_${line.replace('.', '_')}", base / ".lines" / line)
  val venvJars = (venv / "lib" * "python3*" / "site-packages" / "pyspark" / "jars").get()
  // Absolute, since forked JVMs (tests, codegen) run in the sub-project's directory.
  val dir = sys.env.get(envName).map(file).orElse(venvJars.headOption).map(_.getAbsoluteFile)
  val core = s"spark-core_${jar.scalaBinary}-${jar.compileSpark}.jar"
  val json4s = s"json4s-jackson_${jar.scalaBinary}-${jar.json4s}.jar"
  val install =
    if (jar == SparkLines.primary) "make venv"
    else s"python3 scripts/spark_lines.py venv $line"
  dir match {
    case Some(d) if (d / core).exists && (d / json4s).exists => d
    case Some(d) =>
      sys.error(
        s"mmlspark build: $d does not hold $core and $json4s; install pyspark==" +
          s"${jar.compileSpark} ($install) or point $envName at its jars"
      )
    case None =>
      sys.error(
        s"mmlspark build: Spark ${jar.compileSpark} jars not found; run '$install' " +
          s"or set $envName to the jars folder of pyspark ${jar.compileSpark}"
      )
  }
}

// Spark on Java 17 needs these opens (the list spark-submit passes too).
val sparkJavaOptions = Seq(
  "-Xmx3g",
  "-XX:+IgnoreUnrecognizedVMOptions",
  "--add-opens=java.base/java.lang=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
  "--add-opens=java.base/java.io=ALL-UNNAMED",
  "--add-opens=java.base/java.net=ALL-UNNAMED",
  "--add-opens=java.base/java.nio=ALL-UNNAMED",
  "--add-opens=java.base/java.util=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
  "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
  "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
  "-Djdk.reflect.useDirectMethodHandle=false",
  "-Dio.netty.tryReflectionSetAccessible=true"
)

lazy val exportPackagedJar =
  taskKey[Unit]("Copies the jar into the Python package and the self-contained jar into dist/")

lazy val commonSettings = Seq(
  sparkJar := SparkLines.jarFor(scalaBinaryVersion.value),
  Compile / unmanagedJars ++=
    (sparkJarsDir((ThisBuild / baseDirectory).value, sparkJar.value) ** "*.jar").classpath,
  libraryDependencies += scalatest,
  Test / fork := true,
  Test / parallelExecution := false,
  Test / javaOptions ++= sparkJavaOptions,
  // The settings of every other test JVM (the Makefile's TEST_JVM_OPTS: the client compiler only,
  // the serial collector), which make passes in MMLSPARK_TEST_JVM_OPTS; unset, the defaults.
  Test / javaOptions ++= sys.env
    .getOrElse("MMLSPARK_TEST_JVM_OPTS", "")
    .split(" ")
    .filter(_.nonEmpty)
    .toSeq,
  Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD")
)

lazy val core = (project in file("scala"))
  .settings(commonSettings)
  .settings(
    name := "mmlspark",
    crossScalaVersions := SparkLines.jars.map(_.scalaVersion),
    // Provided (Spark ships it, at the version checked above) and intransitive: its own
    // dependencies are Spark's too, and older Jacksons beside Spark's would break Spark in tests.
    libraryDependencies += ("org.json4s" %% "json4s-jackson" % sparkJar.value.json4s % Provided)
      .intransitive(),
    // The line's own sources: the few calls whose Spark API differs between lines.
    Compile / unmanagedSourceDirectories +=
      (Compile / sourceDirectory).value / sparkJar.value.sources,
    libraryDependencies ++= Seq(
      "org.openpnp" % "opencv" % "4.9.0-0",
      "com.microsoft.onnxruntime" % onnxRuntimeArtifact % onnxRuntimeVersion
    ),
    // The param traits, written before the library compiles: the shared ones from the table in
    // project/SharedParamsSpec.scala (the codegen project writes their Python twins from the same
    // table), and each stage's own from project/StageParamsSpec.scala.
    Compile / sourceGenerators += Def.task {
      val managed = (Compile / sourceManaged).value / "mmlspark"
      val sources = (managed / "contracts" / "SharedParams.scala" -> SharedParams.scalaSource()) +:
        StageParams.groups.map { g =>
          managed / g.pkg.stripPrefix("mmlspark.").replace('.', '/') / s"${g.traitName}.scala" ->
            g.scalaSource
        }
      sources.foreach { case (out, source) =>
        if (!out.isFile || IO.read(out) != source) IO.write(out, source)
      }
      sources.map(_._1)
    }.taskValue,
    // Read by the Python package and the code generator to check that both sides match.
    Compile / resourceGenerators += Def.task {
      val out = (Compile / resourceManaged).value / "mmlspark" / "build.properties"
      IO.write(
        out,
        s"version=${version.value}\nscalaVersion=${scalaVersion.value}\n" +
          s"sparkVersion=${sparkJar.value.compileSpark}\n" +
          s"onnxRuntimeVersion=$onnxRuntimeVersion\n"
      )
      Seq(out)
    }.taskValue,
    // The self-contained jar for clusters without network access: our classes and our
    // runtime dependencies, never Spark or Scala (the cluster provides both).
    assembly / assemblyJarName :=
      s"mmlspark_${scalaBinaryVersion.value}-assembly-${version.value}.jar",
    assembly / assemblyExcludedJars := {
      val sparkJars = (sparkJarsDir((ThisBuild / baseDirectory).value, sparkJar.value) ** "*.jar")
        .get()
        .map(_.getName)
        .toSet
      (assembly / fullClasspath).value.filter(jar => sparkJars.contains(jar.data.getName))
    },
    assemblyPackageScala / assembleArtifact := false,
    assembly / test := {},
    // The Python package loads the jar the way Spark loads any package: from Maven
    // coordinates (spark.jars.packages), here served by a small Maven repository inside the
    // package whose POM lists the runtime dependencies, so Spark resolves those too and ships
    // all of them to every executor. The version carries the jar's hash, so a rebuilt jar is
    // never mistaken for one in Ivy's cache.
    exportPackagedJar := {
      val root = (ThisBuild / baseDirectory).value
      val jarsDir = root / "mmlspark" / "jars"
      val artifact = s"mmlspark_${scalaBinaryVersion.value}"
      val jar = (Compile / packageBin).value
      val coordinate = s"${version.value}-${Hash.toHex(Hash(jar)).take(8)}"
      val artifactDir = jarsDir / "repo" / "mmlspark" / artifact / coordinate
      // Only this Scala version's jar is replaced: the other lines' jars stay.
      IO.delete(jarsDir / "repo" / "mmlspark" / artifact)
      IO.copyFile(jar, artifactDir / s"$artifact-$coordinate.jar")
      // Scala and Spark come with the cluster, so only the library's own dependencies count.
      val runtimeDeps = libraryDependencies.value.filter { m =>
        m.configurations.isEmpty && !Set("org.scala-lang", "org.apache.spark")
          .contains(m.organization)
      }
      val dependencies = runtimeDeps.map { m =>
        s"    <dependency><groupId>${m.organization}</groupId><artifactId>${m.name}</artifactId>" +
          s"<version>${m.revision}</version></dependency>"
      }
      IO.write(
        artifactDir / s"$artifact-$coordinate.pom",
        s"""<?xml version="1.0" encoding="UTF-8"?>
           |<project>
           |  <modelVersion>4.0.0</modelVersion>
           |  <groupId>mmlspark</groupId>
           |  <artifactId>$artifact</artifactId>
           |  <version>$coordinate</version>
           |  <dependencies>
           |${dependencies.mkString("\n")}
           |  </dependencies>
           |</project>
           |""".stripMargin
      )
      IO.writeLines(
        jarsDir / s"packages_${scalaBinaryVersion.value}.txt",
        Seq(s"mmlspark:$artifact:$coordinate")
      )
      IO.copyFile(assembly.value, root / "dist" / (assembly / assemblyJarName).value)
    },
    assembly / assemblyMergeStrategy := {
      case PathList("META-INF", "services", _*) => MergeStrategy.concat
      case PathList("META-INF", _*) => MergeStrategy.discard
      case other => (assembly / assemblyMergeStrategy).value(other)
    }
  )

lazy val codegen = (project in file("codegen"))
  .dependsOn(core)
  .settings(commonSettings)
  .settings(
    publish / skip := true,
    // The shared param table, compiled here too so the Python mixins come from the same rows.
    Compile / unmanagedSources ++= Seq("SharedParamsSpec.scala", "SparkLines.scala")
      .map((ThisBuild / baseDirectory).value / "project" / _),
    run / fork := true,
    run / javaOptions ++= sparkJavaOptions,
    // The generator reads and writes files relative to the repository root.
    run / javaOptions += s"-Dmmlspark.root=${(ThisBuild / baseDirectory).value}",
    Test / javaOptions += s"-Dmmlspark.root=${(ThisBuild / baseDirectory).value}"
  )

lazy val root = (project in file("."))
  .aggregate(core, codegen)
  .settings(publish / skip := true)
