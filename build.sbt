// mmlspark build: the runtime library (scala/) and the build-only code generator (codegen/).
//
// Spark is a provided dependency taken from the jars inside the pinned pyspark wheel
// (SPARK_JARS_DIR, set by the Makefile), so the jar is compiled against exactly the
// Spark that the Python package runs on, and nothing of Spark is downloaded twice.

import java.nio.file.Files

import mmlspark.codegen.SharedParams

ThisBuild / organization := "mmlspark"
ThisBuild / version := IO.read(file("VERSION")).trim
ThisBuild / scalaVersion := "2.13.18"
ThisBuild / scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-release", "17")
ThisBuild / javacOptions ++= Seq("--release", "17")

val sparkVersion = "4.3.0"
val onnxRuntimeVersion = "1.24.2"
// The ONNX Runtime build the jar depends on: the CPU build, or with MMLSPARK_ONNXRUNTIME=gpu the
// GPU build (CUDA 12, cuDNN 9; 370 MB) for a self-contained jar that runs on GPU clusters.
val onnxRuntimeArtifact = sys.env.get("MMLSPARK_ONNXRUNTIME") match {
  case None | Some("cpu") => "onnxruntime"
  case Some("gpu") => "onnxruntime_gpu"
  case Some(other) => sys.error(s"MMLSPARK_ONNXRUNTIME must be cpu or gpu, not '$other'")
}
val scalatest = "org.scalatest" %% "scalatest" % "3.2.19" % Test
// JSON (param values, model specs, saved metadata) is written with json4s, the library Spark's own
// ML persistence uses and hands to us (ParamsIO). Spark ships it, so it is declared `provided`, at
// the version inside pyspark's jars (checked below), and intransitive: its own dependencies are
// Spark's too, and older Jacksons beside Spark's would break Spark in tests.
val json4sVersion = "4.0.7"
val json4s = ("org.json4s" %% "json4s-jackson" % json4sVersion % Provided).intransitive()

lazy val sparkJarsDir: File = {
  val venvJars = (file(".venv") / "lib" * "python3*" / "site-packages" / "pyspark" / "jars").get()
  // Absolute, since forked JVMs (tests, codegen) run in the sub-project's directory.
  val dir =
    sys.env.get("SPARK_JARS_DIR").map(file).orElse(venvJars.headOption).map(_.getAbsoluteFile)
  dir match {
    case Some(d)
        if (d / s"spark-core_2.13-$sparkVersion.jar").exists &&
          (d / s"json4s-jackson_2.13-$json4sVersion.jar").exists =>
      d
    case Some(d) =>
      sys.error(
        s"mmlspark build: $d does not hold spark-core_2.13-$sparkVersion.jar and " +
          s"json4s-jackson_2.13-$json4sVersion.jar; install pyspark==$sparkVersion (make venv) " +
          "or point SPARK_JARS_DIR at its jars"
      )
    case None =>
      sys.error(
        s"mmlspark build: Spark $sparkVersion jars not found; run 'make venv' " +
          "or set SPARK_JARS_DIR to the jars folder of pyspark"
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
  Compile / unmanagedJars ++= (sparkJarsDir ** "*.jar").classpath,
  libraryDependencies += scalatest,
  Test / fork := true,
  Test / parallelExecution := false,
  Test / javaOptions ++= sparkJavaOptions,
  Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD")
)

lazy val core = (project in file("scala"))
  .settings(commonSettings)
  .settings(
    name := "mmlspark",
    libraryDependencies ++= Seq(
      json4s,
      "org.openpnp" % "opencv" % "4.9.0-0",
      "com.microsoft.onnxruntime" % onnxRuntimeArtifact % onnxRuntimeVersion
    ),
    // The shared param traits, written from the table in project/SharedParamsSpec.scala before
    // the library compiles (the codegen project writes their Python twins from the same table).
    Compile / sourceGenerators += Def.task {
      val out = (Compile / sourceManaged).value / "mmlspark" / "contracts" / "SharedParams.scala"
      val source = SharedParams.scalaSource()
      if (!out.isFile || IO.read(out) != source) IO.write(out, source)
      Seq(out)
    }.taskValue,
    // Read by the Python package and the code generator to check that both sides match.
    Compile / resourceGenerators += Def.task {
      val out = (Compile / resourceManaged).value / "mmlspark" / "build.properties"
      IO.write(
        out,
        s"version=${version.value}\nscalaVersion=${scalaVersion.value}\nsparkVersion=$sparkVersion\n" +
          s"onnxRuntimeVersion=$onnxRuntimeVersion\n"
      )
      Seq(out)
    }.taskValue,
    // The self-contained jar for clusters without network access: our classes and our
    // runtime dependencies, never Spark or Scala (the cluster provides both).
    assembly / assemblyJarName := s"mmlspark-assembly-${version.value}.jar",
    assembly / assemblyExcludedJars := {
      val sparkJars = (sparkJarsDir ** "*.jar").get().map(_.getName).toSet
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
      val jar = (Compile / packageBin).value
      val coordinate = s"${version.value}-${Hash.toHex(Hash(jar)).take(8)}"
      val artifactDir = jarsDir / "repo" / "mmlspark" / "mmlspark_2.13" / coordinate
      IO.delete(jarsDir)
      IO.copyFile(jar, artifactDir / s"mmlspark_2.13-$coordinate.jar")
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
        artifactDir / s"mmlspark_2.13-$coordinate.pom",
        s"""<?xml version="1.0" encoding="UTF-8"?>
           |<project>
           |  <modelVersion>4.0.0</modelVersion>
           |  <groupId>mmlspark</groupId>
           |  <artifactId>mmlspark_2.13</artifactId>
           |  <version>$coordinate</version>
           |  <dependencies>
           |${dependencies.mkString("\n")}
           |  </dependencies>
           |</project>
           |""".stripMargin
      )
      IO.writeLines(jarsDir / "packages.txt", Seq(s"mmlspark:mmlspark_2.13:$coordinate"))
      IO.copyFile(assembly.value, root / "dist" / s"mmlspark-assembly-${version.value}.jar")
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
    Compile / unmanagedSources += (ThisBuild / baseDirectory).value / "project" / "SharedParamsSpec.scala",
    run / fork := true,
    run / javaOptions ++= sparkJavaOptions,
    // The generator reads and writes files relative to the repository root.
    run / javaOptions += s"-Dmmlspark.root=${(ThisBuild / baseDirectory).value}",
    Test / javaOptions += s"-Dmmlspark.root=${(ThisBuild / baseDirectory).value}"
  )

lazy val root = (project in file("."))
  .aggregate(core, codegen)
  .settings(publish / skip := true)
