package mmlspark.core

import java.util.Properties

/** The versions this jar was built with, read from the `mmlspark/build.properties` resource the
  * build writes. The Python package compares them with its own at session start.
  */
object BuildInfo {

  private lazy val props: Properties = {
    val p = new Properties()
    val in = getClass.getResourceAsStream("/mmlspark/build.properties")
    if (in != null) {
      try p.load(in)
      finally in.close()
    }
    p
  }

  def version: String = props.getProperty("version", "unknown")

  def scalaVersion: String = props.getProperty("scalaVersion", "unknown")

  def sparkVersion: String = props.getProperty("sparkVersion", "unknown")
}
