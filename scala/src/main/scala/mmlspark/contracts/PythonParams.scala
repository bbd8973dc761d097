package mmlspark.contracts

import org.apache.spark.ml.param.{LongParam, ParamPair}

/** Param values set from Python. py4j sends a Python int that fits 32 bits as an `Integer`, and a
  * `LongParam` holding an `Integer` fails when it is validated or saved; this one method takes a
  * primitive `long`, so py4j widens the value on the way in.
  */
object PythonParams {

  def longPair(param: LongParam, value: Long): ParamPair[Long] = param.w(value)
}
